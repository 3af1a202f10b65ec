"""Optimizer, learning-rate schedules and the knobs of one optimizer step."""

import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Literal

import torch

from pithtrain.config import ConfigError, NonNegative, Positive, Range


@dataclass
class TrainingCfg:
    max_steps: Positive = 100
    """Optimizer steps to run in total (a resumed run continues up to this step; changing it, or another schedule
    key, on resume changes the learning rate of the remaining steps, and the run says so)."""
    global_batch_size: Positive = 8
    """Sequences per optimizer step."""
    micro_batch_size: Positive = 8
    """Sequences per forward/backward; gradients accumulate over global_batch_size / micro_batch_size."""
    lr: Annotated[float, Range(gt=0)] = 3e-4
    """Peak learning rate."""
    min_lr: Annotated[float, Range(ge=0)] = 3e-5
    """Learning rate at the end of the decay."""
    warmup_steps: NonNegative = 10
    """Linear warm-up from 0 to `lr` over these steps."""
    lr_schedule: Literal["cosine", "wsd", "constant"] = "cosine"
    """After warm-up: cosine decay to min_lr, warmup-stable-decay (linear decay at the end), or constant."""
    wsd_decay_fraction: Annotated[float, Range(ge=0, le=1)] = 0.2
    """For `wsd`: the fraction of max_steps spent in the final linear decay."""
    weight_decay: Annotated[float, Range(ge=0)] = 0.1
    """AdamW decoupled weight decay, applied to matrices only (not norms)."""
    adam_beta1: Annotated[float, Range(ge=0, le=1)] = 0.9
    """AdamW beta1."""
    adam_beta2: Annotated[float, Range(ge=0, le=1)] = 0.95
    """AdamW beta2."""
    adam_eps: Annotated[float, Range(gt=0)] = 1e-8
    """AdamW epsilon."""
    grad_clip: Annotated[float, Range(ge=0)] = 1.0
    """Clip the global gradient norm to this value; 0 turns clipping off."""
    seed: int = 1234
    """Seed for weight init and data order."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """`auto` uses CUDA when available."""
    precision: Literal["auto", "bf16", "fp32", "fp8"] = "auto"
    """Compute precision; weights and optimizer state stay fp32. `auto`: bf16 on CUDA, fp32 on CPU. `fp8`: bf16,
    with FP8 matmuls (128-element block scales) for the attention projections, the experts and the head (each
    model file says which; the widths they need, vocab and tokens per micro-batch multiples of 128)."""
    compile: bool = False
    """torch.compile each layer's stages 1 and 5 (all but the experts), fullgraph (a graph break is an error), except
    under FSDP with pipeline_parallel_size > 1, where stage 1 compiles as the pieces between FSDP units."""

    def __post_init__(self):
        if self.global_batch_size % self.micro_batch_size:
            raise ConfigError(
                f"training.global_batch_size = {self.global_batch_size} is not a multiple of "
                f"training.micro_batch_size = {self.micro_batch_size}."
            )
        if self.min_lr > self.lr:
            raise ConfigError(f"training.min_lr = {self.min_lr} exceeds training.lr = {self.lr}.")


def resolve_device(cfg: TrainingCfg) -> torch.device:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError('training.device = "cuda" but no CUDA device is visible. Use "cpu" or "auto".')
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def compute_dtype(cfg: TrainingCfg, device: torch.device) -> torch.dtype:
    if cfg.precision == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return torch.bfloat16 if cfg.precision in ("bf16", "fp8") else torch.float32


def make_optimizer(model: torch.nn.Module, cfg: TrainingCfg) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = all(p.is_cuda for p in model.parameters()) or None
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps, fused=fused)


SCHEDULE_KEYS = ("max_steps", "lr", "min_lr", "warmup_steps", "lr_schedule", "wsd_decay_fraction")


def schedule_of(cfg: TrainingCfg) -> dict:
    """The keys that decide every step's learning rate (stored in each checkpoint)."""
    return {k: getattr(cfg, k) for k in SCHEDULE_KEYS}


def schedule_change(saved: dict, cfg: TrainingCfg, step: int) -> str | None:
    """What resuming at `step` under `cfg` does to a run whose checkpoint holds the schedule `saved`, or None."""
    changed = [k for k in SCHEDULE_KEYS if k in saved and saved[k] != getattr(cfg, k)]
    if not changed:
        return None
    before = lr_at(step, dataclasses.replace(cfg, **{k: saved[k] for k in changed}))
    return (
        f"the learning-rate schedule differs from the checkpoint's "
        f"({', '.join(f'training.{k}: {saved[k]!r} -> {getattr(cfg, k)!r}' for k in changed)}). Steps 1-{step} ran "
        f"under the old schedule; from step {step + 1} the new one applies (its lr {lr_at(step, cfg):.3e}, against "
        f"{before:.3e} under the old), so this run is not the one the checkpoint's settings would have made. "
        f"Keep those keys as they were to continue it exactly."
    )


def lr_at(step: int, cfg: TrainingCfg) -> float:
    """Learning rate for optimizer step `step` (0-based)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return cfg.lr
    if cfg.lr_schedule == "cosine":
        progress = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
        return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(1.0, progress)))
    if cfg.lr_schedule == "wsd":
        decay_steps = int(cfg.wsd_decay_fraction * cfg.max_steps)
        decay_start = cfg.max_steps - decay_steps
        if step < decay_start:
            return cfg.lr
        return cfg.lr + (cfg.min_lr - cfg.lr) * (step - decay_start + 1) / max(1, decay_steps)
    raise AssertionError(cfg.lr_schedule)
