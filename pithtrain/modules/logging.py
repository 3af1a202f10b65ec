"""Progress lines and the metrics file: step, loss, lr, grad norm, tokens/s, MFU, memory, ETA."""

import json
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import torch

from pithtrain.config import Positive, Range


@dataclass
class LoggingCfg:
    log_interval: Positive = 1
    """Print a progress line every this many steps (every step goes to metrics.jsonl)."""
    peak_tflops: Annotated[float, Range(gt=0)] = 989.0
    """Accelerator peak for MFU, in TFLOP/s per device (989: H100/H200 dense BF16 spec)."""


def peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux: process peak RSS


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop the records after `last_step` (steps a crashed run took past its last checkpoint, which the resumed run
    takes again); the file is replaced atomically."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text().splitlines(keepends=True):
        try:
            if json.loads(line)["step"] <= last_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue  # a line cut off by a crash mid-write
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(kept))
    tmp.replace(path)


class ProgressLogger:
    """Times steps and writes one JSON line per step to `<run_dir>/metrics.jsonl`. `tokens` is the global batch's;
    MFU is per device (the world's tokens/s over `num_devices`). A run that starts at `start_step` (a resume, or 0)
    first drops the records after it."""

    def __init__(
        self, cfg: LoggingCfg, run_dir: Path, flops_per_token: float, device: torch.device, max_steps: int,
        num_devices: int = 1, start_step: int = 0,
    ):  # fmt: skip
        self.cfg, self.device, self.max_steps, self.num_devices = cfg, device, max_steps, num_devices
        self.flops_per_token = flops_per_token
        truncate_metrics(run_dir / "metrics.jsonl", start_step)
        self.metrics_file = open(run_dir / "metrics.jsonl", "a")
        self.last_time = time.perf_counter()
        self.step_times: list[float] = []

    def log(self, step: int, loss: float, lr: float, grad_norm: float, tokens: int) -> dict:
        now = time.perf_counter()
        dt, self.last_time = now - self.last_time, now
        self.step_times.append(dt)
        tokens_per_s = tokens / dt
        per_device = tokens_per_s / self.num_devices
        record = {
            "step": step,
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_device": per_device,
            "step_time_s": dt,
            "peak_mem_gib": peak_memory_gib(self.device),
        }
        if self.device.type == "cuda":  # MFU against a CPU peak would mean nothing
            record["mfu"] = per_device * self.flops_per_token / (self.cfg.peak_tflops * 1e12)
        self.metrics_file.write(json.dumps(record) + "\n")
        self.metrics_file.flush()
        if step % self.cfg.log_interval == 0 or step == self.max_steps:
            recent = self.step_times[-10:]
            eta = (self.max_steps - step) * sum(recent) / len(recent)
            mfu = f" mfu {100 * record['mfu']:.1f}%" if "mfu" in record else ""
            print(
                f"step {step}/{self.max_steps} loss {loss:.4f} lr {lr:.2e} grad_norm {grad_norm:.3f} "
                f"tokens/s {tokens_per_s:,.0f}{mfu} mem {record['peak_mem_gib']:.2f}GiB eta {eta:.0f}s",
                flush=True,
            )
        return record

    def close(self):
        self.metrics_file.close()
