"""Every pretrain_gpt.py command line that a Megatron-LM task provides, or that a Megatron-LM gold runs, passes the
pinned Megatron-LM's own parse_args and validate_args, with no dropout (DeepSeek-V2 has none).

pretrain_gpt.py asserts CUDA before it reads its arguments, so on a CPU a bad flag (`--save` without `--save-interval`
failed operate-01's gold on the H200 only) shows nowhere. Here each script runs as written in a copy of the pin, with a
`python` first on PATH that stops at `-m torch.distributed.run ... pretrain_gpt.py ARGS`: it validates ARGS and exits
(and an `nvidia-smi` that lists 8 GPUs, for the paper scripts' own count).
"""

import os
import shutil
import subprocess
import sys

import pytest

from ate_bench.workspace import REPO_ROOT

TASKS = REPO_ROOT / "tasks"
PROVIDED = [  # (script, the directory whose files sit beside it in the workspace)
    *[
        (TASKS / f"feature/provided/{p}/megatron-lm/{s}.sh", TASKS / f"feature/provided/{p}/megatron-lm")
        for p in ("gpu1", "paper")  # smoke's refuse before any run: no CUDA on a CPU profile
        for s in ("train", "verify")
    ],
    *[
        (TASKS / f"operate/01-getting-started/prepare/{p}/megatron-lm/train.sh",)
        + (TASKS / f"operate/01-getting-started/prepare/{p}/megatron-lm",)
        for p in ("smoke", "gpu1", "paper")
    ],
    (
        TASKS / "operate/02-train-evaluate/gold/megatron-lm/train.sh",
        TASKS / "operate/02-train-evaluate/prepare/gpu1/megatron-lm",
    ),
]

SHIM = """#!{python}
import os, sys
argv = sys.argv[1:]
if argv[:2] != ["-m", "torch.distributed.run"]:
    os.execv({python!r}, [{python!r}, *argv])
world = argv[argv.index("--nproc-per-node") + 1] if "--nproc-per-node" in argv else "1"
args = argv[next(i for i, a in enumerate(argv) if a.endswith(".py")) + 1 :]
os.environ.update(WORLD_SIZE=world, RANK="0", LOCAL_RANK="0")
sys.path.insert(0, os.getcwd())
sys.argv = ["pretrain_gpt.py", *args]
from megatron.training.arguments import parse_args, validate_args
args = validate_args(parse_args())
print("ARGUMENTS VALID", "dropout", args.attention_dropout, args.hidden_dropout)
"""


@pytest.mark.parametrize("script, beside", PROVIDED, ids=[str(s.relative_to(TASKS)) for s, _ in PROVIDED])
def test_megatron_command_line_passes_validate_args(script, beside, megatron_pin, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(megatron_pin, ws, symlinks=True)
    subprocess.run(["cp", "-rL", f"{beside}/.", str(ws)], check=True)
    shutil.copy(script, ws / script.name)
    tokens = ws / "artifacts" / "tokens"  # verify.sh tokenizes only where no dataset is
    tokens.mkdir(parents=True)
    (tokens / "corpus_text_document.idx").touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).write_text(SHIM.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\nfor i in 0 1 2 3 4 5 6 7; do echo "GPU $i: stand-in"; done\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("PYTHON", None)
    done = subprocess.run(["bash", script.name], cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert "ARGUMENTS VALID" in out, f"{script.relative_to(TASKS)}: pretrain_gpt.py's arguments fail:\n{out[-3000:]}"
    # DeepSeek-V2 has no dropout; Megatron's default 0.1 made operate-03's step-1 routing impossible to recompute
    assert "dropout 0.0 0.0" in out, f"{script.relative_to(TASKS)} trains with dropout (Megatron's default 0.1)"
