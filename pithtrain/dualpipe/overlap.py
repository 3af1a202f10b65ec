"""One chunk's forward and backward, stage by stage, and the driver that overlaps a forward with a backward.

DeepSeek-V3 tech report, sec. 3.2.1 and Figure 4 (DualPipe's overlapped forward-backward chunk): while one
micro-batch's forward computes, another's backward communicates, and the other way round. A MoE layer has
five stages: 1 attention + routing (compute), 2 dispatch (comm), 3 experts (compute), 4 combine (comm),
5 aggregate (compute).

`staged_forward` runs a chunk one stage at a time and cuts the autograd graph at every stage boundary: each
stage's outputs are detached into fresh leaves that later stages consume. Each stage is kept as a `Segment`
(what it consumed, what it produced, the leaves cut from that), so `staged_backward` can run the stages in
reverse, one `torch.autograd.backward(outputs, [leaf.grad, ...])` each. Dense layers (DeepSeek's first
layers, whose stage 1 returns n_TD None), the embedding and the head are one segment each. Both are
generators that pause before every stage and say what it is, "compute" or "comm".

`overlap` resumes a forward and a backward alternately so that a comm stage of one is issued beside a
compute stage of the other: on GPU the comm stage runs on a side stream, with events ordering each job's
own stages across the two streams; on CPU they are plain calls in the same order. Every EP (and CP) rank
of a pipeline stage holds the same layers and runs the same schedule, so its collectives stay matched.
"""

from dataclasses import dataclass

import torch

from pithtrain.modules.expert_parallel import combine, dispatch


@dataclass
class Segment:
    kind: str  # "compute" or "comm"
    inputs: list[torch.Tensor]  # leaves this stage consumed (their .grad flows to earlier stages)
    outputs: list[torch.Tensor]  # what it produced, still attached to its graph
    leaves: list[torch.Tensor] | None  # detached copies of `outputs` for later stages; None for the chunk output


@dataclass
class Streams:
    compute: "torch.cuda.Stream"
    comm: "torch.cuda.Stream"


def make_streams(device: torch.device) -> Streams | None:
    """The current stream for compute, a side stream for stages 2 and 4; None (plain calls) off GPU."""
    if device.type != "cuda":
        return None
    return Streams(torch.cuda.current_stream(device), torch.cuda.Stream(device))


def _cut(segments: list[Segment], kind: str, inputs: list, outputs: list) -> list[torch.Tensor]:
    """Close a stage: record it and return leaves cut from its outputs for the stages that follow."""
    leaves = [t.detach().requires_grad_(t.requires_grad) for t in outputs]
    segments.append(Segment(kind, [t for t in inputs if t.requires_grad], outputs, leaves))
    return leaves


def _cross_streams(streams: Streams | None, used_on_comm: list, made_on_comm: list) -> None:
    """A tensor used on a stream other than its allocator's must say so, or its memory may be reused early."""
    if streams is None:
        return
    for t in used_on_comm:
        if isinstance(t, torch.Tensor):
            t.record_stream(streams.comm)
    for t in made_on_comm:
        if isinstance(t, torch.Tensor):
            t.record_stream(streams.compute)


def staged_forward(model, chunk, x, ids_BS, pos_BS, labels_BS, aux_loss_scale, num_tokens, dtype, streams=None):
    """Generator: the forward of `chunk` (dualpipev.Chunk) from input x (None for the embedding chunk),
    pausing before each stage. Returns (output, segments): the chunk's output (the loss over `num_tokens`
    for the head chunk) still attached to the last segment, whose `leaves` is None."""
    segments: list[Segment] = []
    autocast = torch.autocast(ids_BS.device.type, dtype=dtype, enabled=dtype != torch.float32)
    cos, sin = model.rope(ids_BS, pos_BS)
    x_BSD = x
    if chunk.has_embed:
        yield "compute"
        (x_BSD,) = _cut(segments, "compute", [], [model.model.embed_tokens(ids_BS)])
    for i in chunk.layer_ids:
        layer = model.model.layers[str(i)]
        yield "compute"
        with autocast:
            h_BSD, n_TD, topk_ids_TK, topk_w_TK = layer.forward_stage1(x_BSD, cos, sin, aux_loss_scale)
        if not layer.is_moe:  # a dense layer (models.DecoderLayer) is one segment: stage 1 returns its output
            (x_BSD,) = _cut(segments, "compute", [x_BSD], [h_BSD])
            continue
        h_BSD, n_TD, topk_w_TK = _cut(segments, "compute", [x_BSD], [h_BSD, n_TD, topk_w_TK])
        yield "comm"
        with autocast:
            x_ND, tokens_per_expert_E, plan = dispatch(n_TD, topk_ids_TK, layer.num_experts)
        _cross_streams(streams, [n_TD, topk_ids_TK], [x_ND, tokens_per_expert_E])
        (x_ND,) = _cut(segments, "comm", [n_TD], [x_ND])
        yield "compute"
        with autocast:
            y_ND = layer.forward_stage3(x_ND, tokens_per_expert_E)
        (y_ND,) = _cut(segments, "compute", [x_ND], [y_ND])
        yield "comm"
        with autocast:
            y_TKD = combine(y_ND, plan)
        _cross_streams(streams, [y_ND], [y_TKD])
        (y_TKD,) = _cut(segments, "comm", [y_ND], [y_TKD])
        yield "compute"
        with autocast:
            out_BSD = layer.forward_stage5(h_BSD, y_TKD, topk_w_TK)
        (x_BSD,) = _cut(segments, "compute", [h_BSD, y_TKD, topk_w_TK], [out_BSD])
    if chunk.has_head:
        yield "compute"
        with autocast:
            loss = model.loss_sum(x_BSD, labels_BS) / num_tokens
        segments.append(Segment("compute", [x_BSD] if x_BSD.requires_grad else [], [loss], None))
        return loss, segments
    assert segments, "a chunk with neither layers nor embedding/head"
    segments[-1].leaves = None  # the last stage's output leaves the chunk as it is
    return segments[-1].outputs[0], segments


def _grads(segment: Segment, grad: torch.Tensor | None):
    """The (outputs, gradients) pairs a segment's backward runs on; `grad` is the chunk output's."""
    if segment.leaves is None:
        return segment.outputs, [grad]
    pairs = [(o, leaf.grad) for o, leaf in zip(segment.outputs, segment.leaves) if leaf.grad is not None]
    return [o for o, _ in pairs], [g for _, g in pairs]


def staged_backward(segments: list[Segment], grad: torch.Tensor | None, streams: Streams | None = None):
    """Generator: the backward of a chunk recorded by `staged_forward`, one stage at a time in reverse; the
    chunk input's gradient lands in its .grad. `grad` is the output's gradient (None for the loss)."""
    for segment in reversed(segments):
        yield segment.kind
        outputs, grads = _grads(segment, grad)
        if segment.kind == "comm":
            _cross_streams(streams, grads, [])
        if outputs:
            torch.autograd.backward(outputs, grads)
        if segment.kind == "comm":
            _cross_streams(streams, [], [t.grad for t in segment.inputs])
        segment.outputs, segment.leaves = [], []  # free this stage's graph and gradients now


def backward_input_grads(segments: list[Segment], grad: torch.Tensor):
    """Weight-gradient deferral on a cut graph: every stage's input gradients now (down to the chunk input),
    keeping the graphs; returns the function that later computes the weight gradients."""
    for segment in reversed(segments):
        outputs, grads = _grads(segment, grad)
        if outputs and segment.inputs:
            torch.autograd.backward(outputs, grads, inputs=segment.inputs, retain_graph=True)

    def weight_grads():
        for segment in reversed(segments):
            outputs, grads = _grads(segment, grad)
            weights = _weights(outputs, segment.inputs)
            if outputs and weights:
                torch.autograd.backward(outputs, grads, inputs=weights)
            segment.outputs, segment.leaves = [], []  # free this stage's graph and gradients now

    return weight_grads


def _weights(outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The leaves of the outputs' graph other than the stage's inputs: the weights as the forward used them. Under
    FSDP those are its unsharded parameters, not the modules' sharded ones (which are not in the graph), and their
    gradients are what FSDP's backward hooks reduce."""
    stage_inputs = {id(t) for t in inputs}
    stack, seen, weights = [o.grad_fn for o in outputs], set(), []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        leaf = getattr(node, "variable", None)  # an AccumulateGrad node
        if leaf is not None:
            if id(leaf) not in stage_inputs:
                weights.append(leaf)
            continue
        stack.extend(next_node for next_node, _ in node.next_functions)
    return weights


def drain(job) -> None:
    """Run a staged job to the end with no partner (its stages back to back)."""
    for _ in job:
        pass


def overlap(forward, backward, streams: Streams | None = None) -> list[tuple]:
    """Run a forward and a backward job (generators of stage kinds) to the end, interleaved: whenever one's
    next stage is comm and the other's is compute, both are issued together, comm first; otherwise the
    jobs take turns to run one stage alone. Returns the trace, one tuple of (job, kind) per tick.

    On GPU a comm stage runs on `streams.comm` after waiting for its own job's last compute stage, and a
    compute stage waits for its own job's last comm stage, so each job stays in order while the other job's
    work fills the gap. The order of issue is the same on every rank, so collectives stay matched."""
    jobs = {"F": forward, "B": backward}
    kinds = {name: next(job, None) for name, job in jobs.items()}
    events = {"F": None, "B": None}

    def advance(name):
        kind, job = kinds[name], jobs[name]
        if streams is None:
            kinds[name] = next(job, None)
            return (name, kind)
        stream = streams.comm if kind == "comm" else streams.compute
        if events[name] is not None:
            stream.wait_event(events[name])
        with torch.cuda.stream(stream):
            kinds[name] = next(job, None)
        events[name] = stream.record_event()
        return (name, kind)

    trace, alone = [], "B"
    while kinds["F"] is not None or kinds["B"] is not None:
        f, b = kinds["F"], kinds["B"]
        if f is not None and b is not None and f != b:
            comm, compute = ("F", "B") if f == "comm" else ("B", "F")
            trace.append((advance(comm), advance(compute)))
            continue
        # Same kind next (or one job left): one goes alone, taking turns, which shifts the two jobs by
        # a stage so that their comm and compute stages line up again (every comm stage finds a partner).
        alone = "B" if f is None or (b is not None and alone == "F") else "F"
        trace.append((advance(alone),))
    if streams is not None:  # whatever follows (sends, the next phase) runs on the compute stream
        streams.compute.wait_stream(streams.comm)
    return trace
