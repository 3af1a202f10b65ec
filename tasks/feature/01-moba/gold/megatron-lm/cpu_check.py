"""CPU check of a Megatron-LM feature port: a tiny GPTModel of the gpu1 model's kind (MLA with the gpu1 head sizes,
qk 128 + 64 and v 128, YaRN; MoE; 4 layers, the first dense; mla_local_spec's local modules), built from
pretrain_gpt.py arguments with the feature's flags on, two forward + backward passes. The op, wrapped by name in its
module, must be called once a pass from every layer's attention, its output used and every tensor input that
requires grad reached by a gradient; the calls are also recorded by the checker's own seam wrapper
(feature_check.recording with the task's check.py SPEC) and held to its rules (judge_calls, gpu1 profile) and its
replay against reference.py. Built again without the flags: the op is never called.

usage: python cpu_check.py MEGATRON_TREE MODULE:OP FLAG...   (the tree at the pin with the gold patch applied;
megatron.training's imports need the six package), e.g. for MoBA (8 blocks of 4 at this sequence of 32):
    python cpu_check.py TREE megatron.core.transformer.multi_latent_attention:moba_attention \\
        --moba --moba-block-size 4 --moba-top-k 3"""

import contextlib
import importlib
import importlib.util
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))  # <task>/gold/megatron-lm, also through a link
TREE, OP, ENABLE = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path[:0] = [TREE, os.path.join(HERE, "../../../provided/gpu1/megatron-lm")]  # mla_local_spec.py
torch.cuda.current_device = lambda: "cpu"  # Megatron puts its buffers on "the current device"
_spec = importlib.util.spec_from_file_location("task_check", os.path.join(HERE, "../../check.py"))
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)
from feature_check import SEAM_REPLAY_CALLS, recording  # noqa: E402  (check.py put it on the path)

PASSES = 2  # the seam reads the projections' outputs from a layer's second forward on
TINY = (  # model_args.sh's gpu1 model, narrow (hidden 64, 2 heads, 8 experts) and short (sequence 32)
    "--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 2 --kv-lora-rank 16 "
    "--qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 8 --moe-router-topk 2 "
    "--moe-ffn-hidden-size 32 --moe-shared-expert-intermediate-size 64 --moe-layer-freq [0]*1+[1]*3 "
    "--seq-length 32 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 2 --lr 3e-4 "
    "--position-embedding-type rope --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear "
    "--untie-embeddings-and-output-weights --multi-latent-attention --qk-layernorm --rope-type yarn "
    "--rotary-scaling-factor 40 --mscale 0.707 --mscale-all-dim 0.707 --moe-router-pre-softmax "
    "--moe-router-load-balancing-type seq_aux_loss --tokenizer-type NullTokenizer --vocab-size 255 "
    "--transformer-impl local --no-persist-layer-norm --no-gradient-accumulation-fusion --no-masked-softmax-fusion "
    "--no-rope-fusion --no-bias-swiglu-fusion --no-bias-dropout-fusion --attention-softmax-in-fp32 "
    "--spec mla_local_spec block_spec --eval-iters 0 --use-cpu-initialization --seed 1234"
).split()


def build(flags):
    from megatron.core import tensor_parallel
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.global_vars import set_args, unset_global_variables

    sys.argv = ["pretrain_gpt.py", *TINY, *flags]
    args = validate_args(parse_args())
    args.padded_vocab_size = 256
    unset_global_variables()
    set_args(args)
    sys.modules.pop("mla_local_spec", None)  # the spec reads these arguments' config at import
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()  # no CUDA RNG here
    torch.manual_seed(1234)
    from gpt_builders import gpt_builder

    return args, gpt_builder(args, True, True)


def run(flags):
    """PASSES forward + backward passes; returns the losses, our records of the op's calls (caller module, input
    shapes, gradient norms) and the seam's."""
    mod_name, name = OP.split(":")
    mod = importlib.import_module(mod_name)
    op, calls, seam_calls = getattr(mod, name), [], []
    seam = recording(op, check.SPEC, seam_calls)

    def wrapped(*a, **kw):
        frame, caller = sys._getframe(1), None
        while frame is not None and caller is None:
            obj = frame.f_locals.get("self")
            caller = id(obj) if isinstance(obj, torch.nn.Module) and any(True for _ in obj.children()) else None
            frame = frame.f_back
        tensors = [t for t in [*a, *kw.values()] if torch.is_tensor(t)]
        record = {"caller": caller, "shapes": [tuple(t.shape) for t in tensors], "grads": {}, "out": 0.0}
        for i, t in enumerate(tensors):
            if t.requires_grad:
                record["grads"][i] = 0.0
                t.register_hook(lambda g, i=i: record["grads"].__setitem__(i, float(g.norm())))
        out = seam(*a, **kw)
        out.register_hook(lambda g: record.__setitem__("out", float(g.norm())))
        calls.append(record)
        return out

    setattr(mod, name, wrapped)
    try:
        args, model = build(flags)
        from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler

        MoEAuxLossAutoScaler.set_loss_scale(torch.tensor(1.0))
        model.train()
        g, losses = torch.Generator().manual_seed(0), []
        for _ in range(PASSES):
            tokens = torch.randint(0, 255, (2, args.seq_length), generator=g)
            pos = torch.arange(args.seq_length).expand_as(tokens)
            mask = torch.ones(args.seq_length, args.seq_length).triu(1).bool()[None, None]
            loss = model(tokens, pos, mask, labels=torch.roll(tokens, -1, 1)).float().mean()
            loss.backward()
            losses.append(float(loss))
        return losses, calls, seam_calls
    finally:
        setattr(mod, name, op)


if __name__ == "__main__":
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29541")
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel()
    losses, calls, seam_calls = run(ENABLE)
    layers = len({c["caller"] for c in calls})
    print(f"on {ENABLE}: losses {losses}, {len(calls)} calls from {layers} modules; inputs {calls[0]['shapes']}")
    for c in calls:
        grads = " ".join(f"{v:.2e}" for v in c["grads"].values())
        print(f"  output grad {c['out']:.2e}; input grads {grads}")
    reached = all(c["out"] > 0 and all(v > 0 for v in c["grads"].values()) for c in calls)
    problems = [] if layers == 4 and len(calls) == 4 * PASSES and reached else ["calls, layers or gradients"]
    errors = [c["error"] for c in seam_calls if "error" in c]
    replay = max(c.get("replay_error", 0.0) for c in seam_calls)
    print(f"seam: {len(seam_calls)} calls, replay error (first {SEAM_REPLAY_CALLS}) {replay:.2e}, errors {errors}")
    problems += errors + (["replay"] if not replay <= check.SPEC.tolerance[torch.float32] else [])
    problems += [f"seam: {why}" for why in check.SPEC.judge_calls(seam_calls, "gpu1")]
    losses_off, calls_off, _ = run([])
    print(f"off: losses {losses_off}, {len(calls_off)} calls")
    problems += ["the op is called with the flags off"] if calls_off else []
    print("\n".join(f"FAIL: {p}" for p in problems) or "PASS")
    sys.exit(1 if problems else 0)
