"""Progress lines and the metrics file: step, loss, lr, grad norm, tokens/s, MFU, memory, ETA; the same scalars to
TensorBoard and Weights & Biases when asked (optional packages, checked before the run writes anything)."""

import importlib
import json
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import torch

from pithtrain.config import ConfigError, Positive, Range


@dataclass
class LoggingCfg:
    log_interval: Positive = 1
    """Print a progress line every this many steps (every step goes to metrics.jsonl)."""
    peak_tflops: Annotated[float, Range(gt=0)] = 989.0
    """Accelerator peak for MFU, in TFLOP/s per device (989: H100/H200 dense BF16 spec)."""
    tensorboard: bool = False
    """Also write metrics.jsonl's scalars as TensorBoard event files in `<run_dir>/tensorboard`
    (pip install tensorboard)."""
    wandb_project: str = ""
    """Also log metrics.jsonl's scalars to this Weights & Biases project (pip install wandb; WANDB_MODE=offline
    is respected); empty: off."""


def optional_module(name: str, key: str, package: str):
    """Import the module an optional logging key needs, or say which package to install."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ConfigError(
            f"logging.{key} is set, but the '{package}' package is not installed: pip install {package} "
            f"(or turn logging.{key} off)."
        ) from e


def check_logging_packages(cfg: LoggingCfg) -> None:
    """Called at set-up, before anything is written."""
    if cfg.tensorboard:
        optional_module("torch.utils.tensorboard", "tensorboard", "tensorboard")
    if cfg.wandb_project:
        optional_module("wandb", "wandb_project", "wandb")


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
        num_devices: int = 1, start_step: int = 0, run_config: dict[str, Any] | None = None,
    ):  # fmt: skip
        self.cfg, self.device, self.max_steps, self.num_devices = cfg, device, max_steps, num_devices
        self.flops_per_token = flops_per_token
        self.metrics_path = run_dir / "metrics.jsonl"
        truncate_metrics(self.metrics_path, start_step)
        self.metrics_file = open(self.metrics_path, "a")
        self.start_time = self.last_time = time.perf_counter()
        self.step_times: list[float] = []
        self.tokens, self.last_step, self.last_loss = 0, start_step, float("nan")
        self.tensorboard = self.wandb = None
        if cfg.tensorboard:  # steps after start_step that an earlier run wrote are purged from the event files
            writer_class = optional_module("torch.utils.tensorboard", "tensorboard", "tensorboard").SummaryWriter
            self.tensorboard = writer_class(str(run_dir / "tensorboard"), purge_step=start_step + 1)
        if cfg.wandb_project:
            wandb = optional_module("wandb", "wandb_project", "wandb")
            self.wandb = wandb.init(project=cfg.wandb_project, dir=str(run_dir), name=run_dir.name, config=run_config)

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
        scalars = {k: v for k, v in record.items() if k != "step"}
        if self.tensorboard is not None:
            for key, value in scalars.items():
                self.tensorboard.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log(scalars, step=step)
        first = not self.tokens
        self.tokens, self.last_step, self.last_loss = self.tokens + tokens, step, loss
        if step % self.cfg.log_interval == 0 or step == self.max_steps or first:
            recent = self.step_times[-10:]
            eta = (self.max_steps - step) * sum(recent) / len(recent)
            mfu = f" mfu {100 * record['mfu']:.1f}%" if "mfu" in record else ""
            print(
                f"step {step}/{self.max_steps} loss {loss:.4f} lr {lr:.2e} grad_norm {grad_norm:.3f} "
                f"tokens/s {tokens_per_s:,.0f}{mfu} mem {record['peak_mem_gib']:.2f}GiB eta {eta:.0f}s"
                + (f" (every step's metrics: {self.metrics_path})" if first else ""),
                flush=True,
            )
        return record

    def summary(self, checkpoint: Path | None) -> str:
        """The end-of-run line: steps, tokens, wall time, mean tokens/s, final loss, where the results are."""
        steps, busy = len(self.step_times), sum(self.step_times)
        return (
            f"done: {steps} steps (to step {self.last_step}), {self.tokens:,} tokens in "
            f"{time.perf_counter() - self.start_time:.1f}s, mean {self.tokens / busy if busy else 0:,.0f} tokens/s, "
            f"final loss {self.last_loss:.4f}; checkpoint {checkpoint}; metrics {self.metrics_path}"
        )

    def close(self):
        self.metrics_file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()
