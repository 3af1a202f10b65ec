"""DualPipeV: a bidirectional pipeline folded into a V (DeepSeek-V3 tech report, sec. 3.2.1; "cut-in-half").

The model is cut into 2 x PP chunks; rank r holds chunk r (phase 0, going down the ranks) and chunk
2PP-1-r (phase 1, coming back up). Rank 0 therefore holds both the embedding and the head, and the last
rank hands phase 0's output straight to its own phase 1. Every micro-batch runs F0 then F1, B1 then B0.

The schedule below is straight-line code in eight labelled phases whose counts derive from the rank; it
pairs one micro-batch's forward with another's backward (F0+B1, F1+B0) and runs the two layer by layer,
stage by stage (overlap.py), so that the dispatch/combine of one hides under the compute of the other.
Every forward runs staged (its graph cut at stage boundaries), paired or not, so any backward can be too.
Weight-gradient deferral (zero bubble): some backward passes compute only the input gradient, to unblock
the previous stage sooner, and queue the weight gradient for the weight-gradient slots that would otherwise
be bubbles. It runs as a second autograd pass per stage, restricted to the weights the stage's graph holds
(overlap.backward_input_grads). Under FSDP those are its unsharded parameters: FSDP's backward hooks fire in
both passes, gather the weights again for the second where they were resharded, and reduce-scatter the
gradients once the second pass has accumulated them (tests/test_dualpipe_fsdp_defer.py checks every gradient
against one process).

Pipeline messages travel on one process group per (neighbour pair, channel) (contexts/distributed.py),
so each channel is a FIFO in micro-batch order and no channel can block another.
"""

from collections import deque
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from pithtrain.contexts import distributed
from pithtrain.dualpipe.overlap import (
    Segment,
    backward_input_grads,
    drain,
    make_streams,
    overlap,
    staged_backward,
    staged_forward,
)


def pipeline_layer_split(num_layers: int, pp_size: int) -> list[list[int]]:
    """Global layer indices of each of the 2 x PP chunks. Extra layers go one per rank first (its phase-0
    chunk, from the bottom of the V up), then to phase-1 chunks; the edge chunks (embedding, head) come last."""
    num_chunks = 2 * pp_size
    counts = [num_layers // num_chunks] * num_chunks
    priority = [*range(pp_size - 1, 0, -1), *range(pp_size, num_chunks - 1), 0, num_chunks - 1]
    for c in priority[: num_layers % num_chunks]:
        counts[c] += 1
    starts = [sum(counts[:c]) for c in range(num_chunks)]
    return [list(range(starts[c], starts[c] + counts[c])) for c in range(num_chunks)]


@dataclass
class Chunk:
    layer_ids: list[int]
    has_embed: bool
    has_head: bool


@dataclass
class _Saved:
    inputs: torch.Tensor | None  # leaf whose .grad goes upstream (None for the embedding chunk)
    segments: list[Segment]  # the chunk's forward, cut into stages (overlap.py)


@dataclass
class _PhaseState:
    forwards: int = 0
    backwards: int = 0
    saved: dict[int, _Saved] = field(default_factory=dict)


class DualPipeV:
    def __init__(self, model, chunks: tuple[Chunk, Chunk], boundary_shape, device, defer_weight_grads: bool):
        self.model, self.chunks, self.device = model, chunks, device
        self.boundary_shape = boundary_shape
        self.defer_weight_grads = defer_weight_grads
        self.rank, self.size = distributed.pp_rank, distributed.pp_size
        self.streams = make_streams(device)

    # ---- point to point: (channel, pair index) names a group; see contexts/distributed.py ----
    def _peer(self, pair: int) -> int:
        group = distributed.pp_channels[("fwd0", pair)]
        ranks = dist.get_process_group_ranks(group)
        return ranks[0] if ranks[1] == distributed.rank else ranks[1]

    def _send(self, channel: str, pair: int, tensor: torch.Tensor) -> None:
        tensor = tensor.detach().float().contiguous()
        self.pending_sends.append(
            (dist.isend(tensor, self._peer(pair), group=distributed.pp_channels[(channel, pair)]), tensor)
        )

    def _irecv(self, channel: str, pair: int):
        buf = torch.empty(self.boundary_shape, dtype=torch.float32, device=self.device)
        return buf, dist.irecv(buf, self._peer(pair), group=distributed.pp_channels[(channel, pair)])

    # ---- inputs: posted first, so that a paired F and B wait on both receives together (no ordering) ----
    def _forward_input(self, phase: int):
        """(activation, receive or None) for the next forward of `phase`; (None, None) on the embedding chunk."""
        r, mb = self.rank, self.phases[phase].forwards
        if phase == 0:
            return (None, None) if r == 0 else self._irecv("fwd0", r - 1)
        return (self.handoff_fwd.pop(mb), None) if r == self.size - 1 else self._irecv("fwd1", r)

    def _backward_input(self, phase: int):
        """(output gradient, receive or None) for the next backward of `phase`; (None, None) for the loss."""
        r, mb = self.rank, self.phases[phase].backwards
        if phase == 1:
            return (None, None) if r == 0 else self._irecv("bwd1", r - 1)
        return (self.handoff_bwd.pop(mb), None) if r == self.size - 1 else self._irecv("bwd0", r)

    @staticmethod
    def _wait(received):
        tensor, work = received
        if work is not None:
            work.wait()
        return tensor

    # ---- the three operations; F and B are generators of stages (overlap.py), run alone or paired ----
    def _forward(self, phase: int, x: torch.Tensor | None):
        state, chunk, r = self.phases[phase], self.chunks[phase], self.rank
        mb = state.forwards
        state.forwards += 1
        if x is not None:
            x.requires_grad_()
        h, segments = yield from staged_forward(
            self.model, chunk, x, self.input_ids[mb], self.position_ids[mb], self.labels[mb],
            self.aux_loss_scale, self.num_tokens, self.dtype, self.streams,
        )  # fmt: skip
        if chunk.has_head:
            self.loss_sum += h.detach() * self.num_tokens
        state.saved[mb] = _Saved(x, segments)
        if phase == 0 and r < self.size - 1:
            self._send("fwd0", r, h)
        elif phase == 0:
            self.handoff_fwd[mb] = h.detach().float()
        elif r > 0:
            self._send("fwd1", r - 1, h)

    def _backward(self, phase: int, grad: torch.Tensor | None, defer: bool):
        state, r = self.phases[phase], self.rank
        mb = state.backwards
        state.backwards += 1
        saved = state.saved.pop(mb)
        defer = defer and self.defer_weight_grads
        if defer and saved.inputs is not None:
            self.weight_queue.append(backward_input_grads(saved.segments, grad))
        elif defer:  # the embedding chunk sends nothing upstream: its whole backward can wait
            self.weight_queue.append(lambda: drain(staged_backward(saved.segments, grad)))
        else:
            yield from staged_backward(saved.segments, grad, self.streams)
        if saved.inputs is None:
            return
        if phase == 1 and r < self.size - 1:
            self._send("bwd1", r, saved.inputs.grad)
        elif phase == 1:
            self.handoff_bwd[mb] = saved.inputs.grad
        elif r > 0:
            self._send("bwd0", r - 1, saved.inputs.grad)

    def _weight(self) -> None:
        assert self.weight_queue or not self.defer_weight_grads, "a weight-gradient slot with no deferred work"
        if self.weight_queue:  # without deferral the weight-gradient slots are empty
            self.weight_queue.popleft()()

    def step(self, input_ids, labels, position_ids, aux_loss_scale: float, num_tokens: int, dtype) -> torch.Tensor:
        """One optimizer step's forward and backward over all micro-batches; returns this rank's loss sum
        (non-zero only on rank 0, which holds the head)."""
        N, P, r = len(input_ids), self.size, self.rank
        if N < 2 * P:
            raise ValueError(f"DualPipeV needs at least 2 x pipeline_parallel_size = {2 * P} micro-batches, got {N}.")
        self.input_ids, self.labels, self.position_ids = input_ids, labels, position_ids
        self.aux_loss_scale, self.num_tokens, self.dtype = aux_loss_scale, num_tokens, dtype
        self.phases = (_PhaseState(), _PhaseState())
        self.handoff_fwd, self.handoff_bwd = {}, {}
        self.weight_queue, self.pending_sends = deque(), []
        self.loss_sum = torch.zeros((), device=self.device)
        wgrad = self._weight  # one queued weight gradient

        def fwd(phase):  # a forward alone
            drain(self._forward(phase, self._wait(self._forward_input(phase))))

        def bwd(phase, defer):  # a backward alone
            drain(self._backward(phase, self._wait(self._backward_input(phase)), defer))

        def fwd_bwd(f_phase, b_phase):  # a forward and a backward, stage by stage (overlap.py)
            f_in, b_in = self._forward_input(f_phase), self._backward_input(b_phase)
            x, grad = self._wait(f_in), self._wait(b_in)
            overlap(self._forward(f_phase, x), self._backward(b_phase, grad, defer=False), self.streams)

        # 1. Warm-up: phase-0 forwards fill the pipe below this rank.
        for _ in range(2 * (P - r - 1)):
            fwd(0)
        # 2. Both phases' forwards alternate until phase 1 reaches this rank.
        for _ in range(r + 1):
            fwd(0)
            fwd(1)
        # 3. First phase-1 backwards; their weight gradients fill the next bubble.
        for _ in range(P - r - 1):
            bwd(1, defer=True)
            wgrad()
            fwd(1)
        # 4. Steady state: one micro-batch's forward paired with another's backward, both phases.
        for _ in range(N - 2 * P + r + 1):
            fwd_bwd(0, 1)
            fwd_bwd(1, 0)
        # 5. Phase 0 has no forwards left.
        for _ in range(P - r - 1):
            bwd(1, defer=False)
            fwd_bwd(1, 0)
        # 6. Only backwards remain; the last r + 1 of them defer their weight gradients.
        for i in range(2 * (r + 1)):
            bwd(1 - i % 2, defer=i >= r + 1)
        # 7. Weight gradients fill the gaps between the last phase-0 backwards.
        for _ in range(P - r - 1):
            wgrad()
            bwd(0, defer=True)
        # 8. Drain the weight-gradient queue.
        while self.weight_queue:
            wgrad()

        for work, _ in self.pending_sends:
            work.wait()
        for phase in self.phases:
            assert phase.forwards == phase.backwards == N and not phase.saved, (phase.forwards, phase.backwards)
        assert not self.handoff_fwd and not self.handoff_bwd
        return self.loss_sum
