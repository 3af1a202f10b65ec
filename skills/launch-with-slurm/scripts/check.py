"""PASS when an sbatch script parses (`bash -n`) and launches the given mesh; else FAIL: <reason>.

    python skills/launch-with-slurm/scripts/check.py SCRIPT --nodes 2 --gpus-per-node 8 [--pp 2] [--cp 1] [--ep 8]

Checks the #SBATCH node and GPU counts, then the torchrun line (`python -m torch.distributed.run` or `torchrun`,
continuation lines joined): --nnodes and --nproc-per-node equal them, a c10d rendezvous is given, it runs
`-m pithtrain train` on a config that exists, and its `--set distributed.*_parallel_size` values equal the mesh
(absent = 1) and divide the world size.
"""

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

SIZES = {"pp": "pipeline_parallel_size", "cp": "context_parallel_size", "ep": "expert_parallel_size"}


def option(words: list[str], name: str) -> str | None:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def problems(script: Path, args) -> list[str]:
    if not script.exists():
        return [f"{script} does not exist"]
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    if parsed.returncode:
        return [f"bash -n: {parsed.stderr.strip()}"]
    text = script.read_text()
    found = []
    for key, want in [("nodes", args.nodes), ("gpus-per-node", args.gpus_per_node)]:
        got = re.findall(rf"^#SBATCH\s+--{key}[= ](\S+)", text, re.M)
        if got != [str(want)]:
            found.append(f"#SBATCH --{key} is {got or 'missing'}, expected {want}")
    lines = text.replace("\\\n", " ").splitlines()
    launch = [ln for ln in lines if "torch.distributed.run" in ln or re.search(r"\btorchrun\b", ln)]
    if len(launch) != 1:
        return found + [f"expected one torchrun line, found {len(launch)}"]
    words = shlex.split(launch[0])
    for name, want in [("--nnodes", args.nodes), ("--nproc-per-node", args.gpus_per_node)]:
        if option(words, name) != str(want):
            found.append(f"torchrun {name} is {option(words, name)}, expected {want}")
    if option(words, "--rdzv-backend") != "c10d" or not option(words, "--rdzv-endpoint"):
        found.append("torchrun has no c10d rendezvous (--rdzv-backend c10d --rdzv-endpoint HOST:PORT)")
    if "pithtrain" not in words or words[words.index("pithtrain") - 1] != "-m" or "train" not in words:
        return found + ["the torchrun line does not run `-m pithtrain train CONFIG`"]
    config = words[words.index("pithtrain") + 2]
    if not Path(config).exists():
        found.append(f"config {config} does not exist (relative paths are read from the submit directory)")
    sets = dict(s.split("=", 1) for i, s in enumerate(words) if i and words[i - 1] == "--set" and "=" in s)
    for short, key in SIZES.items():
        got = int(sets.get(f"distributed.{key}", 1))
        if got != getattr(args, short):
            found.append(f"distributed.{key} is {got}, expected {getattr(args, short)}")
    world, model = args.nodes * args.gpus_per_node, args.pp * args.cp * args.ep
    if world % model:
        found.append(f"world size {world} is not a multiple of PP x CP x EP = {model}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("script", type=Path)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--gpus-per-node", type=int, required=True)
    for short in SIZES:
        ap.add_argument(f"--{short}", type=int, default=1)
    args = ap.parse_args()
    found = problems(args.script, args)
    for reason in found:
        print(f"FAIL: {reason}")
    if not found:
        mesh = f"PP {args.pp} CP {args.cp} EP {args.ep}"
        print(f"PASS ({args.script} launches {args.nodes} x {args.gpus_per_node} GPUs, {mesh})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
