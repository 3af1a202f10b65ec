"""CPU evidence for a Megatron-LM feature gold (02-dynmoe, 04-moe-plus-plus), where pretrain_gpt.py cannot run (it
asserts CUDA): in WORKSPACE (Megatron-LM at 3bec9aa with the gold's solve.sh applied), the checker's op check (part a)
three times, then a tiny GPTModel (MLA + MoE: 4 layers, 1 dense, 8 experts top-2, the gpu1 flags at toy sizes, with
the operate tasks' mla_local_spec.py) trained 4 steps in float32 with Adam, under the task's own seam probe, its
calls judged by check_seam as on the smoke profile (8 experts, top-2, 4 layers); the same without the flag, where the
op must never be called; and, where the task has one, its branch run (check.py BRANCH_ARGS["megatron-lm"], 1 step).
The arguments pass Megatron's own parse_args and validate_args, so the feature's flags are pretrain_gpt.py's.

    python cpu_check.py TASK WORKSPACE        (torch CPU, Python >= 3.11; nothing of this runs on a GPU)

CPU stand-ins, none in the model: torch.cuda.current_device() answers "cpu" (Megatron puts buffers on it), the CUDA
RNG tracker's fork is a no-op, `six` (imported by a tokenizer module) is stubbed, and the causal mask is passed in.
"""

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")  # Megatron warns of the Transformer Engine and Apex it lacks

FEATURE = Path(__file__).resolve().parents[3]  # tasks/feature
SPEC_DIR = FEATURE.parent / "operate/01-getting-started/prepare/gpu1/megatron-lm"  # mla_local_spec.py
TINY = (
    "--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 --kv-lora-rank 16 --qk-head-dim 16 "
    "--qk-pos-emb-head-dim 8 --v-head-dim 16 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 32 "
    "--moe-shared-expert-intermediate-size 64 --moe-layer-freq [0]*1+[1]*3 --seq-length 32 "
    "--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 2 --lr 3e-4 --position-embedding-type rope "
    "--normalization RMSNorm "
    "--norm-epsilon 1e-6 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights --multi-latent-attention "
    "--qk-layernorm --rope-type yarn --rotary-scaling-factor 40 --mscale 0.707 --mscale-all-dim 0.707 "
    "--moe-router-pre-softmax --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-3 "
    "--tokenizer-type NullTokenizer --vocab-size 255 --transformer-impl local --no-persist-layer-norm "
    "--no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-rope-fusion --no-bias-swiglu-fusion "
    "--no-bias-dropout-fusion --attention-softmax-in-fp32 --spec mla_local_spec block_spec --eval-iters 0 "
    "--use-cpu-initialization --seed 1234"
).split()


def train(workspace: str, steps: int, flags: list[str]) -> None:
    """Build the tiny model from pretrain_gpt.py arguments and train it `steps` steps on fixed random tokens."""
    import torch
    import torch.distributed as dist

    torch.cuda.current_device = lambda: "cpu"
    stubs = tempfile.mkdtemp()
    Path(stubs, "six.py").write_text("PY2, PY3 = False, True\ntext_type, binary_type = str, bytes\n")
    sys.path[:0] = [workspace, str(SPEC_DIR), stubs]
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state, tensor_parallel
    from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.global_vars import set_args

    sys.argv = ["pretrain_gpt.py", *TINY, *flags]
    args = validate_args(parse_args())
    args.padded_vocab_size = 256
    set_args(args)
    parallel_state.initialize_model_parallel()
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    torch.manual_seed(1234)
    from gpt_builders import gpt_builder

    model = gpt_builder(args, True, True)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    MoEAuxLossAutoScaler.set_loss_scale(torch.tensor(1.0))
    tokens = torch.randint(0, 255, (args.micro_batch_size, args.seq_length), generator=torch.Generator().manual_seed(0))
    position_ids = torch.arange(args.seq_length).expand_as(tokens)
    mask = torch.ones(args.seq_length, args.seq_length).triu(1).bool()[None, None]  # True: masked out
    model.train()
    for step in range(steps):
        opt.zero_grad()
        loss = model(tokens, position_ids, mask, labels=tokens.roll(-1, 1)).float().mean()
        loss.backward()
        opt.step()
        print(f"step {step + 1}/{steps} loss {loss.item():.6f}", flush=True)


def seam_run(check, check_py: Path, workspace: Path, feature: dict, steps: int, flags: list[str], judge=None):
    """This file's train() under the task's seam probe: (losses, op calls, aux calls, check_seam's problems)."""
    from feature_check import SEAM_PROBE, check_seam

    with tempfile.TemporaryDirectory() as out:
        seam = {"FEATURE_SEAM_OP": feature["op"], "FEATURE_SEAM_AUX": feature["aux"], "FEATURE_SEAM_OUT": out}
        env = {**os.environ, "PYTHONPATH": str(SEAM_PROBE), "FEATURE_SEAM_CHECK": str(check_py), **seam}
        cmd = [sys.executable, __file__, "--train", str(workspace), str(steps), *flags]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"training failed:\n{done.stderr[-4000:]}")
        losses = [line for line in done.stdout.splitlines() if line.startswith("step ")]
        calls = {
            n: [c for f in Path(out).glob(f"{n}-*.json") for c in json.loads(f.read_text())]
            for n in ("seam", "aux-seam")
        }
        problems = check_seam(Path(out), check.SPEC, feature["op"], "smoke", feature["aux"], judge=judge)
        return losses, calls["seam"], calls["aux-seam"], problems


def main(task: str, workspace: Path) -> int:
    check_py = FEATURE / task / "check.py"
    spec = importlib.util.spec_from_file_location("task_check", check_py)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)  # puts tasks/feature on sys.path
    from feature_check import check_op, import_op, load_feature_json

    feature, problems = load_feature_json(workspace, needs_aux=True)
    ok = not problems
    for run in range(3):
        for key, key_spec in (("op", check.SPEC), ("aux", check.SPEC.aux)):
            op, why = import_op(workspace, feature[key])
            why = why or check_op(op, key_spec, label=key)
            ok &= not why
            print(f"op check {run + 1} {feature[key]}: {why or 'PASS'}")
    for name, flags, steps, judge in (
        ("on", feature["enable"], 4, None),
        ("off", feature["disable"], 4, None),
        *([("branch", [*feature["enable"], *check.BRANCH_ARGS["megatron-lm"]], 1, check.judge_branch)]
          if hasattr(check, "BRANCH_ARGS") else []),
    ):  # fmt: skip
        losses, calls, aux_calls, problems = seam_run(check, check_py, workspace, feature, steps, flags, judge)
        print(f"{name} {flags}: {'; '.join(losses)}; op calls {len(calls)}, aux calls {len(aux_calls)}")
        if name == "off":
            ok &= not calls and not aux_calls
            print(f"  off: {'PASS' if not calls and not aux_calls else 'FAIL: the op ran with the feature off'}")
        else:
            ok &= not problems
            print(f"  check_seam ({name}, {len(calls) // steps} calls a step): {problems or 'PASS'}")
            if name == "branch":
                print(f"  tokens routed to zero-computation experts only, per call: "
                      f"{[c['chosen']['only zero-computation'] for c in calls]}; rows of y with no gradient: "
                      f"{[c['y_zero_rows'] for c in calls]}")  # fmt: skip
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "--train":
        train(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(main(sys.argv[1], Path(sys.argv[2]).resolve()))
