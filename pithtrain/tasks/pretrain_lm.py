"""Pretraining a language model: config, set-up, and the training loop."""

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pithtrain.config import ConfigError, apply_overrides, load_dataclass, read_toml
from pithtrain.models import model_family
from pithtrain.modules.checkpoint import (
    CheckpointCfg,
    CheckpointError,
    check_model_matches,
    latest_checkpoint,
    load_checkpoint,
    read_meta,
    save_checkpoint,
)
from pithtrain.modules.data import DataCfg, ResumableSampler, get_batch, make_dataset
from pithtrain.modules.logging import LoggingCfg, ProgressLogger
from pithtrain.modules.training import TrainingCfg, compute_dtype, lr_at, make_optimizer, resolve_device


@dataclass
class PretrainLMCfg:
    run_dir: str
    """Directory for this run's config copy, metrics.jsonl and (by default) checkpoints."""
    model: Any
    """The `[model]` table; `model.family` picks its dataclass (see pithtrain/models/__init__.py)."""
    training: TrainingCfg = field(default_factory=TrainingCfg)
    data: DataCfg = field(default_factory=DataCfg)
    checkpoint: CheckpointCfg = field(default_factory=CheckpointCfg)
    logging: LoggingCfg = field(default_factory=LoggingCfg)


def load_pretrain_cfg(path: str, overrides: list[str] = ()) -> PretrainLMCfg:
    table = read_toml(path)
    apply_overrides(table, list(overrides))
    model_table = table.pop("model", None)
    if not isinstance(model_table, dict):
        raise ConfigError(f"config '{path}' has no [model] table; it needs at least model.family.")
    family = model_family(model_table.get("family"))
    table["model"] = {}
    cfg = load_dataclass(PretrainLMCfg, table)
    cfg.model = load_dataclass(family.cfg_class, model_table, prefix="model.")
    return cfg


def launch(cfg: PretrainLMCfg) -> list[dict]:
    """Train; returns the per-step metric records. Everything is validated before anything is written."""
    family = model_family(cfg.model.family)
    tc = cfg.training
    device = resolve_device(tc)
    dtype = compute_dtype(tc, device)
    run_dir = Path(cfg.run_dir)
    ckpt_dir = Path(cfg.checkpoint.dir or run_dir / "checkpoints")

    # Set-up, validation first: data, then any checkpoint to resume or start from.
    dataset = make_dataset(cfg.data, cfg.model.vocab_size, tc.seed)
    resume = latest_checkpoint(ckpt_dir) if ckpt_dir.exists() else None
    if resume is not None and cfg.checkpoint.resume == "never":
        raise CheckpointError(
            f"checkpoint.dir '{ckpt_dir}' already holds checkpoints and checkpoint.resume = \"never\". "
            f'Pick a new run_dir / checkpoint.dir, or set checkpoint.resume = "auto" to continue.'
        )
    for source in [resume, cfg.checkpoint.init_from or None]:
        if source is not None:
            check_model_matches(read_meta(source), cfg.model)
            break

    torch.manual_seed(tc.seed)
    with torch.device(device):
        model = family.model_class(cfg.model)
    optimizer = make_optimizer(model, tc)
    step, consumed = 0, 0
    if resume is not None:
        load_checkpoint(resume, model, optimizer)
        meta = read_meta(resume)
        step, consumed = meta["step"], meta["consumed_samples"]
        print(f"resumed from {resume} at step {step}", flush=True)
    elif cfg.checkpoint.init_from:
        load_checkpoint(read_meta(cfg.checkpoint.init_from)["path"], model)
        print(f"initialised model weights from {cfg.checkpoint.init_from}", flush=True)

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    sampler = ResumableSampler(len(dataset), tc.seed, shuffle=cfg.data.kind == "tokens")
    logger = ProgressLogger(
        cfg.logging, run_dir, family.flops_per_token(cfg.model, cfg.data.seq_len), device, tc.max_steps
    )
    num_micro = tc.global_batch_size // tc.micro_batch_size
    # The load-balancing loss is averaged over micro-batches, like the token loss.
    aux_loss_scale = cfg.model.aux_loss_coef / num_micro
    meta = {"model": dataclasses.asdict(cfg.model)}
    records = []
    print(
        f"training {sum(p.numel() for p in model.parameters()):,} parameters on {device} ({dtype})",
        flush=True,
    )

    while step < tc.max_steps:
        # One optimizer step: gradient accumulation over micro-batches, token-weighted loss.
        input_ids, labels = get_batch(dataset, sampler, consumed, tc.global_batch_size)
        input_ids, labels = input_ids.to(device), labels.to(device)
        num_tokens = int((labels != -100).sum())
        loss_sum = torch.zeros((), device=device)
        for mb in range(num_micro):
            sl = slice(mb * tc.micro_batch_size, (mb + 1) * tc.micro_batch_size)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
                mb_loss = model(input_ids[sl], labels[sl], aux_loss_scale=aux_loss_scale)
            (mb_loss / num_tokens).backward()
            loss_sum += mb_loss.detach()
        clip = tc.grad_clip if tc.grad_clip > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        lr = lr_at(step, tc)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        consumed += tc.global_batch_size
        loss = float(loss_sum) / num_tokens
        if not torch.isfinite(torch.tensor(loss)):
            raise FloatingPointError(f"loss is {loss} at step {step}; lower training.lr or check the data.")
        records.append(logger.log(step, loss, lr, float(grad_norm), tc.global_batch_size * cfg.data.seq_len))

        if step == tc.max_steps or (cfg.checkpoint.interval and step % cfg.checkpoint.interval == 0):
            t0 = time.perf_counter()
            path = save_checkpoint(
                ckpt_dir,
                step,
                model,
                optimizer,
                meta | {"consumed_samples": consumed},
                cfg.checkpoint.keep_last,
            )
            print(f"saved checkpoint {path} in {time.perf_counter() - t0:.1f}s", flush=True)
            logger.last_time = time.perf_counter()  # the save is not part of the next step's time
    logger.close()
    return records
