"""FP8 training tracks BF16: one config, trained twice with the same seed and data, compared at the end.

    python3 benchmarks/fp8_convergence.py [--config benchmarks/fp8_convergence.toml] [--out results/fp8_convergence]

Runs `python -m pithtrain train CONFIG` with training.precision = "bf16", then "fp8", reads both metrics.jsonl,
and compares the mean loss of the last 10 steps: PASS when FP8's is within --tolerance (default 1%) of BF16's.
The data is a corpus drawn here from a fixed first-order Markov chain over the vocabulary (each token has 4
successors with probabilities 0.55, 0.25, 0.12, 0.08: 1.13 nats of entropy per token), longer than the run
reads, so no sequence repeats: the loss falls towards the chain's entropy instead of towards memorisation,
where small numerical differences would decide the last digits.
Writes one JSON record (both loss curves, step times, the verdict, git commit, torch version, GPU) to
<out>/<UTC time>.json and prints the verdict last.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from throughput import git_state  # noqa: E402

SUCCESSOR_PROBS = np.array([0.55, 0.25, 0.12, 0.08])


def markov_corpus(out: Path, vocab: int, chains: int = 1024, length: int = 4096, seed: int = 0) -> float:
    """Token shards (pithtrain's format) of `chains` independent walks; returns the chain's entropy in nats."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, vocab, size=(vocab, len(SUCCESSOR_PROBS)))
    walk = np.empty((chains, length), dtype=np.uint16)
    walk[:, 0] = rng.integers(0, vocab, size=chains)
    for t in range(1, length):
        walk[:, t] = successors[walk[:, t - 1], rng.choice(len(SUCCESSOR_PROBS), size=chains, p=SUCCESSOR_PROBS)]
    out.mkdir(parents=True)
    walk.tofile(out / "tokens-00000.bin")
    index = {"format": "pithtrain-tokens-v1", "dtype": "uint16", "num_tokens": walk.size, "num_documents": chains}
    index |= {"max_token_id": int(walk.max()), "eos_id": 0, "tokenizer_vocab_size": vocab, "tokenizer": "markov chain"}
    index |= {"shards": [{"file": "tokens-00000.bin", "num_tokens": walk.size}]}
    (out / "index.json").write_text(json.dumps(index, indent=1))
    return float(-(SUCCESSOR_PROBS * np.log(SUCCESSOR_PROBS)).sum())


def train(config: Path, precision: str, run_dir: Path, data: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "pithtrain", "train", str(config), "--set", f'training.precision="{precision}"']
    cmd += ["--set", f'run_dir="{run_dir}"', "--set", f'data.path="{data}"']
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run(cmd, cwd=REPO, env=env, check=True)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "benchmarks" / "fp8_convergence.toml"))
    ap.add_argument("--out", default=str(REPO / "results" / "fp8_convergence"))
    ap.add_argument("--tolerance", type=float, default=0.01, help="largest relative gap of the final losses")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pith-fp8-"))
    vocab = tomllib.loads(Path(args.config).read_text())["model"]["vocab_size"]
    entropy = markov_corpus(work / "markov", vocab)
    curves = {p: train(Path(args.config), p, work / p, work / "markov") for p in ("bf16", "fp8")}
    final = {p: statistics.mean(r["loss"] for r in curves[p][-10:]) for p in curves}
    gap = (final["fp8"] - final["bf16"]) / final["bf16"]
    verdict = "PASS" if abs(gap) <= args.tolerance else "FAIL"
    commit, dirty = git_state()
    record = {
        "schema": "pithtrain-fp8-convergence-v1",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": Path(args.config).read_text(),
        "git_commit": commit,
        "git_dirty": dirty,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "data": f"first-order Markov chain, {len(SUCCESSOR_PROBS)} successors per token, entropy {entropy:.4f} nats",
        "final_loss_mean_last_10": final,
        "relative_gap": gap,
        "tolerance": args.tolerance,
        "verdict": verdict,
        "curves": {
            p: [{k: r[k] for k in ("step", "loss", "step_time_s") if k in r} for r in c] for p, c in curves.items()
        },
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}.json").write_text(json.dumps(record, indent=1))
    for p in curves:
        times = [r["step_time_s"] for r in curves[p][len(curves[p]) // 2 :] if "step_time_s" in r]
        print(f"{p:5}: final loss {final[p]:.4f}, median step {statistics.median(times) * 1e3:.1f} ms" if times else p)
    print(f"data: Markov chain with {entropy:.3f} nats per token (the lowest loss possible)")
    print(f"{verdict}: FP8 final loss {gap:+.2%} from BF16 (tolerance {args.tolerance:.0%})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
