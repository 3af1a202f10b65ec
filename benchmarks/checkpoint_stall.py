"""How long a checkpoint save stops training, synchronous against asynchronous, on one GPU.

    python3 benchmarks/checkpoint_stall.py --out DIR            # GPU: the 1.3B shape of issue 29
    python3 benchmarks/checkpoint_stall.py --smoke --out DIR    # CPU, smoke-tiny: checks that the tool runs

The shape is qwen3-30b-a3b-4l of benchmarks/configs.toml cut to 32 experts (1.3B parameters; a checkpoint of
weights and both AdamW moments is 12 bytes a parameter, about 15.6 GB). After warm-up steps it measures, on the
trainer's own `setup`, `forward_backward` and `optimizer_step`:
- the step time with no save (median of --steps steps);
- sync: `save_checkpoint`, the whole save, all of which training waits for;
- async: `AsyncCheckpointer.save` three times, each followed by steps until its background write has ended:
  the time `save` blocks (the pinned host buffers were allocated before, in the background, as the trainer
  allocates them after its first step; that time and the extra time of the steps meanwhile are reported too),
  the write's duration, and the extra time of the steps taken during the write over the no-save median (the
  write's competition for the GIL, host memory and the disk).
The stall of an async save is its blocking time plus that extra step time. Prints a table and writes
DIR/checkpoint_stall.json. Checkpoints go to --ckpt-dir (default: a temporary folder), deleted at the end.
"""

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from throughput import load_config, pithtrain_toml  # noqa: E402

from pithtrain.modules.checkpoint import AsyncCheckpointer, save_checkpoint  # noqa: E402
from pithtrain.tasks.pretrain_lm import forward_backward, load_pretrain_cfg, optimizer_step, setup  # noqa: E402


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step(run, n: int) -> float:
    t0 = time.perf_counter()
    forward_backward(run, 0)
    optimizer_step(run, n)
    sync()
    return time.perf_counter() - t0


def async_save(run, saver, ckpt_dir: Path, n: int, meta: dict, baseline: float) -> dict:
    """One asynchronous save at step n, then steps until its write has ended."""
    t0 = time.perf_counter()
    saver.save(ckpt_dir, n, run.model, run.optimizer, meta, keep_last=1)
    blocked = time.perf_counter() - t0
    during = []
    while saver.thread.is_alive():
        during.append(step(run, n + len(during)))
    written = saver.wait()
    return {
        "blocked_s": blocked,
        "write_s": time.perf_counter() - t0,
        "steps_during_write": len(during),
        "extra_step_time_s": sum(during) - baseline * len(during),
        "stall_s": blocked + max(0.0, sum(during) - baseline * len(during)),
        "path": str(written),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".", help="folder for checkpoint_stall.json")
    ap.add_argument("--ckpt-dir", default="", help="where checkpoints are written (default: a temporary folder)")
    ap.add_argument("--steps", type=int, default=5, help="warm-up steps, then no-save steps timed")
    ap.add_argument("--smoke", action="store_true", help="CPU, config smoke-tiny, fp32: checks that the tool runs")
    args = ap.parse_args()
    cfg = load_config("smoke-tiny" if args.smoke else "qwen3-30b-a3b-4l")
    if not args.smoke:
        cfg["model"] = cfg["model"] | {"num_experts": 32}
    work = Path(tempfile.mkdtemp(prefix="pith-ckpt-stall-", dir=args.ckpt_dir or None))
    mesh = {"gpus": 1, "nodes": 1, "pp": 1, "cp": 1, "ep": 1}
    (work / "run.toml").write_text(pithtrain_toml(cfg, mesh, "natural", "eager", work / "run", 1, smoke=args.smoke))
    run = setup(load_pretrain_cfg(str(work / "run.toml")))
    try:
        n_params = sum(p.numel() for p in run.model.parameters())
        for i in range(args.steps):
            step(run, i)
        baseline = statistics.median(step(run, args.steps + i) for i in range(args.steps))
        saver = AsyncCheckpointer(pin_memory=run.device.type == "cuda")
        t0 = time.perf_counter()
        saver.prepare(run.model, run.optimizer)  # as the trainer does after its first step
        during = []
        while saver.allocating.is_alive():
            during.append(step(run, 2 * args.steps + len(during)))
        allocation = {
            "s": time.perf_counter() - t0,
            "steps_during": len(during),
            "extra_step_time_s": sum(during) - baseline * len(during),
        }
        meta = {"model": dataclasses.asdict(run.cfg.model), "consumed_samples": 0}

        t0 = time.perf_counter()
        save_checkpoint(work / "sync", 1, run.model, run.optimizer, meta, keep_last=1)
        sync_s = time.perf_counter() - t0
        checkpoint_bytes = sum(f.stat().st_size for f in (work / "sync" / "step-00000001").iterdir())
        shutil.rmtree(work / "sync")  # room for the async ones on a small disk

        saves = [async_save(run, saver, work / "async", 10 * (i + 1), meta, baseline) for i in range(3)]
    finally:
        run.lock.release()
    record = {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "parameters": n_params,
        "checkpoint_bytes": checkpoint_bytes,
        "step_s": baseline,
        "sync_save_s": sync_s,
        "host_buffer_allocation": allocation,
        "async_saves": saves,
    }
    shutil.rmtree(work, ignore_errors=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "checkpoint_stall.json").write_text(json.dumps(record, indent=1))
    print(f"{n_params / 1e9:.2f}B parameters, checkpoint {checkpoint_bytes / 1e9:.1f} GB, step {baseline:.3f} s")
    print(f"sync save: training stopped {sync_s:.2f} s")
    print(
        f"async host buffers allocated in the background in {allocation['s']:.2f} s, over "
        f"{allocation['steps_during']} steps, their extra time {allocation['extra_step_time_s']:.2f} s"
    )
    for i, s in enumerate(saves):
        print(
            f"async save {i + 1}: blocked {s['blocked_s']:.2f} s, "
            f"write {s['write_s']:.1f} s over {s['steps_during_write']} steps, their extra time "
            f"{s['extra_step_time_s']:.2f} s; stall {s['stall_s']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
