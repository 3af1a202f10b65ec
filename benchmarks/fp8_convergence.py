"""FP8 training tracks BF16: each config trained twice with the same seed and data, compared at the end.

    python3 benchmarks/fp8_convergence.py [--config CONFIG ...] [--jobs N] [--out results/fp8_convergence]

By default the three families' configs: benchmarks/fp8_convergence.toml (qwen3_moe), fp8_convergence_deepseek_v2.toml
and fp8_convergence_gpt_oss.toml, sized alike (about 30M parameters). For each, runs `python -m pithtrain train
CONFIG` with training.precision = "bf16" and "fp8", reads both metrics.jsonl, and compares the mean loss of the
last 10 steps: PASS when FP8's is within --tolerance (default 1%) of BF16's, for every config.
The trainings run --jobs at a time (default all of them at once, so three families fit benchmarks/gpu_run.sh's
240 s on one GPU; these small models leave most of it idle): with more than one job, step times are measured on a
shared GPU, and the records say so (`concurrent_jobs`); --jobs 1 for step times of the GPU alone.
The data is a corpus drawn here from a fixed first-order Markov chain over the vocabulary (each token has 4
successors with probabilities 0.55, 0.25, 0.12, 0.08: 1.13 nats of entropy per token), longer than the run
reads, so no sequence repeats: the loss falls towards the chain's entropy instead of towards memorisation,
where small numerical differences would decide the last digits.
Writes one JSON record per config (both loss curves, step times, the verdict, git commit, torch version, GPU) to
<out>/<UTC time>-<config name>.json as soon as its two runs end, and prints the verdicts last.
"""

import argparse
import concurrent.futures
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
    """One training, its output in <run_dir>.log (concurrent runs would interleave on the terminal)."""
    cmd = [sys.executable, "-m", "pithtrain", "train", str(config), "--set", f'training.precision="{precision}"']
    cmd += ["--set", f'run_dir="{run_dir}"', "--set", f'data.path="{data}"']
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    log = run_dir.with_suffix(".log")
    with log.open("w") as out:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise RuntimeError(f"{config.name} {precision}: exit {done.returncode}\n{log.read_text()[-3000:]}")
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def record(config: Path, curves: dict, entropy: float, tolerance: float, jobs: int) -> dict:
    final = {p: statistics.mean(r["loss"] for r in curves[p][-10:]) for p in curves}
    gap = (final["fp8"] - final["bf16"]) / final["bf16"]
    commit, dirty = git_state()
    text = config.read_text()
    return {
        "schema": "pithtrain-fp8-convergence-v1",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "family": tomllib.loads(text)["model"]["family"],
        "config": text,
        "concurrent_jobs": jobs,
        "git_commit": commit,
        "git_dirty": dirty,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "data": f"first-order Markov chain, {len(SUCCESSOR_PROBS)} successors per token, entropy {entropy:.4f} nats",
        "final_loss_mean_last_10": final,
        "relative_gap": gap,
        "tolerance": tolerance,
        "verdict": "PASS" if abs(gap) <= tolerance else "FAIL",
        "curves": {
            p: [{k: r[k] for k in ("step", "loss", "step_time_s") if k in r} for r in c] for p, c in curves.items()
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", help="a run config (repeat for several); default: all three")
    ap.add_argument("--jobs", type=int, default=0, help="trainings at once; 0 (default): all of them")
    ap.add_argument("--out", default=str(REPO / "results" / "fp8_convergence"))
    ap.add_argument("--tolerance", type=float, default=0.01, help="largest relative gap of the final losses")
    args = ap.parse_args()
    names = ["fp8_convergence.toml", "fp8_convergence_deepseek_v2.toml", "fp8_convergence_gpt_oss.toml"]
    configs = [Path(c) for c in args.config or [REPO / "benchmarks" / n for n in names]]
    work = Path(tempfile.mkdtemp(prefix="pith-fp8-"))
    corpora = {}  # vocab -> (path, entropy): one corpus per vocabulary size
    for config in configs:
        vocab = tomllib.loads(config.read_text())["model"]["vocab_size"]
        if vocab not in corpora:
            corpora[vocab] = (work / f"markov-{vocab}", markov_corpus(work / f"markov-{vocab}", vocab))
    jobs = args.jobs or 2 * len(configs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    verdicts = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = {}
        for i, config in enumerate(configs):
            data, entropy = corpora[tomllib.loads(config.read_text())["model"]["vocab_size"]]
            for p in ("bf16", "fp8"):
                runs[pool.submit(train, config, p, work / f"{i}-{config.stem}-{p}", data)] = (config, p, entropy)
        curves = {config: {} for config in configs}
        for future in concurrent.futures.as_completed(runs):
            config, p, entropy = runs[future]
            try:
                curves[config][p] = future.result()
            except RuntimeError as e:  # the other configs still run and get their records
                print(f"FAIL {config.name} {p}: {e}", flush=True)
                verdicts[config] = None
                continue
            if len(curves[config]) == 2:  # both runs of this config ended: its record now, whatever comes next
                rec = record(config, curves[config], entropy, args.tolerance, min(jobs, 2 * len(configs)))
                when = f"{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}"
                (out / f"{when}-{config.stem}.json").write_text(json.dumps(rec, indent=1))
                verdicts.setdefault(config, rec)
    for config, rec in verdicts.items():
        if rec is None:
            print(f"FAIL {config.name}: a training did not finish (its log is above)")
            continue
        for p, c in sorted(rec["curves"].items()):
            times = [r["step_time_s"] for r in c[len(c) // 2 :] if "step_time_s" in r]
            step = f", median step {statistics.median(times) * 1e3:.1f} ms" if times else ""
            print(f"{config.name} {p:5}: final loss {rec['final_loss_mean_last_10'][p]:.4f}{step}")
        print(f"{rec['verdict']} {rec['family']}: FP8 final loss {rec['relative_gap']:+.2%} from BF16 ({rec['data']})")
    if jobs > 1 and len(runs) > 1:
        print(f"step times above: {min(jobs, len(runs))} trainings shared the GPU (--jobs 1 for the GPU alone)")
    passed = len(verdicts) == len(configs) and all(rec and rec["verdict"] == "PASS" for rec in verdicts.values())
    families = ", ".join(tomllib.loads(c.read_text())["model"]["family"] for c in configs)
    print(f"{'PASS' if passed else 'FAIL'}: FP8 within {args.tolerance:.0%} of BF16 for {families}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
