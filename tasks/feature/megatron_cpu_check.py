"""CPU evidence for a Megatron-LM feature gold (tasks/feature/0N-*/gold/megatron-lm), where pretrain_gpt.py cannot run
(it asserts CUDA). WORKSPACE is Megatron-LM at 3bec9aa with the task's gold solve.sh applied (ATE_PROFILE=gpu1); its
artifacts/feature.json names the op (and aux) and the "enable" and "disable" flags. It proves, on this CPU:

1. the task's op check (check.py SPEC, and SPEC.aux where the task has one) passes, three times;
2. a tiny GPTModel of the gpu1 model's kind (MLA with gpu1's head sizes, qk 128 + 64 and v 128, YaRN; MoE, 8 experts
   top-2, 4 layers, the first dense; mla_local_spec.py's local modules), built by gpt_builders from pretrain_gpt.py's
   own parse_args and validate_args with the "enable" flags and trained 4 Adam steps in float32 under the checker's
   seam probe, calls the op once a step from each of its modules, uses its outputs and reaches every input that
   requires grad with a gradient; check_seam holds the calls to the task's rules (replay against reference.py,
   judge_calls as the gpu1 profile for attention ops, as smoke, whose 8 experts top-2 the model has, for MoE ops);
3. built with the "disable" flags, the model never calls the op (nor aux);
4. where check.py has BRANCH_ARGS["megatron-lm"], one step with them passes check.judge_branch.

Flags sized for the profile are fitted to the tiny model: MoBA's block size keeps its number of blocks (the profile's
sequence from verify.sh; 8 blocks of 4 at the tiny sequence of 32).

    python tasks/feature/megatron_cpu_check.py TASK_DIR WORKSPACE    (torch CPU; megatron.training imports `six`)

CPU stand-ins, none in the model: torch.cuda.current_device() answers "cpu" (Megatron puts buffers on it), the CUDA
RNG tracker's fork is a no-op, the process group is gloo on an in-memory store, and the causal mask is passed in.
"""

import contextlib
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")  # Megatron warns of the Transformer Engine and Apex it lacks

FEATURE = Path(__file__).resolve().parent  # tasks/feature
SPEC_DIR = FEATURE / "provided/gpu1/megatron-lm"  # mla_local_spec.py
STEPS, TINY_SEQ = 4, 32
TINY = (  # model_args.sh's gpu1 model, narrow (hidden 64, 2 heads, 8 experts) and short (sequence 32)
    "--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 2 --kv-lora-rank 16 "
    "--qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 8 --moe-router-topk 2 "
    "--moe-ffn-hidden-size 32 --moe-shared-expert-intermediate-size 64 --moe-layer-freq [0]*1+[1]*3 "
    f"--seq-length {TINY_SEQ} --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 2 --lr 3e-4 "
    "--position-embedding-type rope --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear "
    "--untie-embeddings-and-output-weights --multi-latent-attention --qk-layernorm --rope-type yarn "
    "--rotary-scaling-factor 40 --mscale 0.707 --mscale-all-dim 0.707 --moe-router-pre-softmax "
    "--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-3 --tokenizer-type NullTokenizer "
    "--vocab-size 255 --transformer-impl local --no-persist-layer-norm --no-gradient-accumulation-fusion "
    "--no-masked-softmax-fusion --no-rope-fusion --no-bias-swiglu-fusion --no-bias-dropout-fusion "
    "--attention-softmax-in-fp32 --spec mla_local_spec block_spec --eval-iters 0 --use-cpu-initialization --seed 1234"
).split()


# In the training process (--train), under seam_probe/sitecustomize.py.


def build(workspace: str, flags: list[str]):
    """The tiny model from pretrain_gpt.py's arguments, on the CPU: (args, model)."""
    import torch
    import torch.distributed as dist

    torch.cuda.current_device = lambda: "cpu"
    sys.path[:0] = [workspace, str(SPEC_DIR)]
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    from megatron.core import parallel_state, tensor_parallel
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.global_vars import set_args

    sys.argv = ["pretrain_gpt.py", *TINY, *flags]
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0")
    args = validate_args(parse_args())
    args.padded_vocab_size = 256
    set_args(args)
    parallel_state.initialize_model_parallel()
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    torch.manual_seed(1234)
    from gpt_builders import gpt_builder

    return args, gpt_builder(args, True, True)


def watch_reach(target: str, records: list[dict]) -> None:
    """Wrap the (seam-wrapped) op: per call, the module that called it and whether a gradient reached each output
    and each input that requires grad (largest |gradient|, 0.0 until one does)."""
    import torch

    module = importlib.import_module(target.split(":")[0])
    name = target.split(":")[1]
    op = getattr(module, name)

    def tensors(values):
        return [t for t in values if torch.is_tensor(t) and t.requires_grad]

    def hook(grads, key):
        return lambda g: grads.__setitem__(key, max(grads[key], float(g.abs().max())))

    def reached(*a, **kw):
        frame, caller = sys._getframe(1), None
        while frame is not None and caller is None:  # the nearest calling module with submodules
            obj = frame.f_locals.get("self")
            caller = id(obj) if isinstance(obj, torch.nn.Module) and any(True for _ in obj.children()) else None
            frame = frame.f_back
        out = op(*a, **kw)
        record = {"caller": caller, "inputs": {}, "outputs": {}}
        for key, group in (("inputs", [*a, *kw.values()]), ("outputs", out if isinstance(out, tuple) else [out])):
            for i, t in enumerate(tensors(group)):
                record[key][i] = 0.0
                t.register_hook(hook(record[key], i))
        records.append(record)
        return out

    setattr(module, name, reached)


def train(workspace: str, flags: list[str]) -> None:
    """Train the tiny model (args.train_iters or STEPS steps, Adam) on fixed random tokens; write the op's reach
    records beside the seam's."""
    import torch

    args, model = build(workspace, flags)
    records: list[dict] = []
    watch_reach(os.environ["FEATURE_SEAM_OP"], records)  # the model looks the op up in its module at each call
    from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler

    MoEAuxLossAutoScaler.set_loss_scale(torch.tensor(1.0))
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, 255, (args.micro_batch_size, args.seq_length), generator=torch.Generator().manual_seed(0))
    position_ids = torch.arange(args.seq_length).expand_as(tokens)
    mask = torch.ones(args.seq_length, args.seq_length).triu(1).bool()[None, None]  # True: masked out
    model.train()
    steps = args.train_iters or STEPS
    for step in range(steps):
        opt.zero_grad()
        loss = model(tokens, position_ids, mask, labels=tokens.roll(-1, 1)).float().mean()
        loss.backward()
        opt.step()
        print(f"step {step + 1}/{steps} loss {loss.item():.6f}", flush=True)
    Path(os.environ["FEATURE_SEAM_OUT"], f"reach-{os.getpid()}.json").write_text(json.dumps(records))


# In the checker.


def load_check(task_dir: Path):
    spec = importlib.util.spec_from_file_location("task_check", task_dir / "check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)  # puts tasks/feature on sys.path
    return check


def fit_tiny(flags: list[str], workspace: Path) -> list[str]:
    """The profile's flags at the tiny model's sizes: MoBA's block size keeps its number of blocks."""
    flags = list(flags)
    if "--moba-block-size" in flags:
        i = flags.index("--moba-block-size") + 1
        seq = int(re.search(r"sequence length: (\d+)", (workspace / "verify.sh").read_text())[1])
        flags[i] = str(TINY_SEQ * int(flags[i]) // seq)
    return flags


def op_checks(check, workspace: Path, feature: dict) -> bool:
    """Part (a) of the checker, three times: the op (and aux) against reference.py."""
    from feature_check import check_op, import_op

    targets = [("op", check.SPEC)] + ([("aux", check.SPEC.aux)] if check.SPEC.aux is not None else [])
    ok = True
    for run in range(3):
        for key, spec in targets:
            op, why = import_op(workspace, feature[key])
            why = why or check_op(op, spec, label=key)
            ok &= not why
            print(f"op check {run + 1} {feature[key]}: {why or 'PASS'}")
    return ok


def seam_run(task_dir: Path, check, workspace: Path, feature: dict, flags: list[str], profile: str, judge=None):
    """train() in a process of its own under the seam probe: (losses, op calls, aux calls, reach records,
    check_seam's problems)."""
    from feature_check import check_seam, seam_env

    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, **seam_env(feature, str(task_dir / "check.py"), out, check.SPEC)}
        cmd = [sys.executable, __file__, "--train", str(workspace), *flags]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            return [], [], [], [], [f"training failed:\n{done.stderr[-3000:]}"]
        losses = [line for line in done.stdout.splitlines() if line.startswith("step ")]
        read = lambda n: [c for f in sorted(Path(out).glob(f"{n}-*.json")) for c in json.loads(f.read_text())]  # noqa: E731
        problems = check_seam(Path(out), check.SPEC, feature["op"], profile, feature.get("aux", ""), judge=judge)
        return losses, read("seam"), read("aux-seam"), read("reach"), problems


def reach_problems(records: list[dict], steps: int, inputs: bool) -> list[str]:
    """Once a step from each calling module, every output used and (with `inputs`) every input that requires grad
    reached by a gradient."""
    per_step = len(records) // max(steps, 1)
    modules = len({r["caller"] for r in records})
    smallest = [min([*(r["inputs"].values() if inputs else []), *r["outputs"].values()], default=0.0) for r in records]
    print(f"  {len(records)} calls from {modules} modules; smallest |gradient| reached per call: "
          f"{' '.join(f'{g:.1e}' for g in smallest)}")  # fmt: skip
    problems = []
    if not records or len(records) != per_step * steps or modules != per_step:
        problems.append(f"{len(records)} calls in {steps} steps from {modules} modules: not once a step per module")
    if not all(g > 0 for g in smallest):
        unreached = [i for i, g in enumerate(smallest) if not g > 0]
        problems.append(f"calls {unreached}: an output unused{' or an input given no gradient' * inputs}")
    return problems


def main(task_dir: Path, workspace: Path) -> int:
    check = load_check(task_dir)
    from feature_check import load_feature_json

    feature, problems = load_feature_json(workspace, needs_aux=check.SPEC.aux is not None)
    if problems:
        print("\n".join(["FAIL", *problems]))
        return 1
    ok = op_checks(check, workspace, feature)
    # The tiny model has gpu1's attention heads and smoke's routing (8 experts, top-2): an attention op is judged as
    # gpu1 and every input of its that requires grad must get a gradient; a MoE op is judged as smoke, its inputs'
    # gradients left to the task's judge_calls (MoE++'s first layer passes a W_g it cannot use without earlier logits).
    moe = ".moe." in feature["op"]
    profile = "smoke" if moe else "gpu1"
    enable = fit_tiny(feature["enable"], workspace)
    branch = getattr(check, "BRANCH_ARGS", {}).get("megatron-lm")
    runs = [("on", enable, None), ("off", feature["disable"], None)]
    runs += [("branch", [*enable, *branch], check.judge_branch)] if branch else []
    for name, flags, judge in runs:
        losses, calls, aux_calls, reach, problems = seam_run(task_dir, check, workspace, feature, flags, profile, judge)
        print(f"{name} {flags}: {'; '.join(losses)}; op calls {len(calls)}, aux calls {len(aux_calls)}")
        if losses and name == "off":  # check_seam's "never called" is the point here
            problems = ["the op ran with the feature off"] if calls or aux_calls or reach else []
        elif losses:
            problems += reach_problems(reach, len(losses), inputs=not moe)
        if name == "branch" and calls and "chosen" in calls[0]:
            print(f"  tokens routed to zero-computation experts only, per call: "
                  f"{[c['chosen']['only zero-computation'] for c in calls]}; rows of y with no gradient: "
                  f"{[c['y_zero_rows'] for c in calls]}")  # fmt: skip
        print(f"  {name} (judged as {profile}): {problems or 'PASS'}")
        ok &= not problems
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--train":
        train(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3:
        sys.exit(main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()))
    else:
        sys.exit(__doc__)
