"""Pretraining a language model: config, set-up, and the training loop."""

import dataclasses
import errno
import fcntl
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pithtrain.config import ConfigError, apply_overrides, load_dataclass, read_toml
from pithtrain.contexts import distributed, precision
from pithtrain.dualpipe.dualpipev import Chunk, DualPipeV, pipeline_layer_split
from pithtrain.models import model_family
from pithtrain.modules.checkpoint import (
    AsyncCheckpointer,
    CheckpointCfg,
    CheckpointError,
    check_checkpoint_dir,
    check_model_matches,
    latest_checkpoint,
    load_checkpoint,
    read_meta,
)
from pithtrain.modules.data import DataCfg, ResumableSampler, get_batch, make_dataset
from pithtrain.modules.distributed import DistributedCfg, apply_fsdp, global_grad_norm, setup_distributed
from pithtrain.modules.logging import LoggingCfg, ProgressLogger, check_logging_packages
from pithtrain.modules.ring_attention import zigzag_positions, zigzag_split
from pithtrain.modules.training import (
    TrainingCfg,
    compute_dtype,
    lr_at,
    make_optimizer,
    resolve_device,
    schedule_change,
    schedule_of,
)
from pithtrain.operators import fp8_linear
from pithtrain.operators.adamw import adamw_step


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
    distributed: DistributedCfg = field(default_factory=DistributedCfg)


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


def check_layout(cfg: PretrainLMCfg, family) -> None:
    """Mesh-dependent checks, once the world is known: each names the keys involved."""
    d, tc, m = distributed, cfg.training, cfg.model
    num_experts = getattr(m, family.experts_key)
    if num_experts % d.ep_size:
        raise ConfigError(
            f"model.{family.experts_key} = {num_experts} is not divisible by expert_parallel_size = {d.ep_size}."
        )
    if d.cp_size > 1 and cfg.data.seq_len % (2 * d.cp_size):
        raise ConfigError(
            f"data.seq_len = {cfg.data.seq_len} must be a multiple of 2 x context_parallel_size = "
            f"{2 * d.cp_size} (the zigzag split)."
        )
    if tc.global_batch_size % (d.dp_ep_size * tc.micro_batch_size):
        raise ConfigError(
            f"training.global_batch_size = {tc.global_batch_size} must be a multiple of data-parallel ranks "
            f"(DP x EP = {d.dp_ep_size}) x training.micro_batch_size = {tc.micro_batch_size}."
        )
    num_micro = tc.global_batch_size // (d.dp_ep_size * tc.micro_batch_size)
    if d.pp_size > 1 and num_micro < 2 * d.pp_size:
        raise ConfigError(
            f"DualPipeV needs at least 2 x pipeline_parallel_size = {2 * d.pp_size} micro-batches per rank, got "
            f"global_batch_size / (DP x EP x micro_batch_size) = {num_micro}. Raise training.global_batch_size."
        )
    if tc.compile and d.cp_size > 1:
        raise ConfigError("training.compile = true needs context_parallel_size = 1 (ring attention talks to peers).")
    if tc.precision == "fp8":
        for name, width in fp8_widths(cfg).items():
            if width % 128:
                raise ConfigError(
                    f'training.precision = "fp8" needs {name} = {width} to be a multiple of 128 (FP8 blocks): '
                    f'change it, or train with training.precision = "bf16".'
                )
    if d.pp_size > 1 and m.tie_word_embeddings:
        raise ConfigError("model.tie_word_embeddings = true is not supported with pipeline_parallel_size > 1.")


def fp8_widths(cfg: PretrainLMCfg) -> dict[str, int]:
    """The sizes that FP8 matmuls cut into 128-wide blocks: the feature widths of each family's FP8 call sites
    (its model file says which), and the tokens of a micro-batch on one rank."""
    m = cfg.model
    widths = {"model.hidden_size": m.hidden_size, "model.vocab_size": m.vocab_size}
    if m.family == "qwen3_moe":
        widths["model.moe_intermediate_size"] = m.moe_intermediate_size
        widths["model.num_key_value_heads x model.head_dim"] = m.num_key_value_heads * m.head_dim  # q: H/G times
    elif m.family == "deepseek_v2":  # kv_a_proj_with_mqa and the dense MLP stay bf16: their widths are free
        widths["model.moe_intermediate_size"] = m.moe_intermediate_size  # routed and shared experts
        widths["model.kv_lora_rank"] = m.kv_lora_rank  # kv_b_proj's input
        if m.q_lora_rank:
            widths["model.q_lora_rank"] = m.q_lora_rank
        H, Dn, Dr, Dv = m.num_attention_heads, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim
        widths["model.num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)"] = H * (Dn + Dr)  # queries
        widths["model.num_attention_heads x (qk_nope_head_dim + v_head_dim)"] = H * (Dn + Dv)  # kv_b_proj
        widths["model.num_attention_heads x v_head_dim"] = H * Dv  # o_proj's input
    elif m.family == "gpt_oss":
        widths["model.intermediate_size"] = m.intermediate_size
        widths["model.num_key_value_heads x model.head_dim"] = m.num_key_value_heads * m.head_dim  # q: H/G times
    else:
        raise ValueError(f"no FP8 widths for model.family = {m.family!r}")
    tokens = cfg.training.micro_batch_size * cfg.data.seq_len // distributed.cp_size
    return widths | {"training.micro_batch_size x data.seq_len / context_parallel_size": tokens}


def make_model(cfg: PretrainLMCfg, family, device: torch.device):
    """The whole model on one pipeline stage; under PP, only this rank's two chunks, built on the meta
    device and then materialised (name-seeded init makes every mesh start from the same weights)."""
    if distributed.pp_size == 1:
        with torch.device(device):
            return family.model_class(cfg.model), None
    with torch.device("meta"):
        model = family.model_class(cfg.model)
    split = pipeline_layer_split(cfg.model.num_hidden_layers, distributed.pp_size)
    r, last = distributed.pp_rank, 2 * distributed.pp_size - 1
    # Rank 0 holds the embedding (its phase-0 chunk) and the head (its phase-1 chunk, the V's last layers).
    chunks = (
        Chunk(split[r], has_embed=r == 0, has_head=False),
        Chunk(split[last - r], has_embed=False, has_head=r == 0),
    )
    keep = {str(i) for c in chunks for i in c.layer_ids}
    model.model.layers = torch.nn.ModuleDict({k: v for k, v in model.model.layers.items() if k in keep})
    if r != 0:
        del model.model.embed_tokens, model.model.norm, model.lm_head
    model.to_empty(device=device)
    model.reset_parameters()
    return model, chunks


@dataclass
class Run:
    """Everything `launch` sets up; `forward_backward` runs one step's micro-batches with it."""

    cfg: PretrainLMCfg
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    pipeline: DualPipeV | None
    dataset: Any
    sampler: ResumableSampler
    device: torch.device
    dtype: torch.dtype
    ckpt_dir: Path
    resume: Path | None
    lock: "RunDirLock | None"
    ckpt_group: Any
    """A process group of the background checkpoint writes' own (None in one process)."""


class TrainingStopped(Exception):
    """The run stopped before training.max_steps; the CLI prints the message and exits with `exit_status`
    (3: a step that was not finite, 130: Ctrl-C)."""

    def __init__(self, message: str, exit_status: int):
        super().__init__(message)
        self.exit_status = exit_status


class RunDirLock:
    """`<run_dir>/run.lock`, holding the PID of the run that writes there: a second run into a busy run_dir is
    refused, naming that PID. The lock is a POSIX record lock (`lockf`, which NFS honours too): the kernel drops it
    when its process dies, so a lock file left by a killed run is taken over (with a note), and it is the
    process's, so a second `setup` in the process that holds it (a script building a run twice) is not refused.
    The file is removed when the run ends."""

    def __init__(self, run_dir: Path):
        if run_dir.exists() and not run_dir.is_dir():
            raise ConfigError(f"run_dir '{run_dir}' is an existing file. Point run_dir at a directory.")
        self.path = run_dir / "run.lock"
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            self.fd = self._take()
        except OSError as e:
            raise ConfigError(
                f"run_dir '{run_dir}' is not writable ({e.strerror}). Point run_dir at a directory this user can "
                f"create and write."
            ) from e
        stale = os.pread(self.fd, 64, 0).decode(errors="replace").strip()
        if stale and stale != str(os.getpid()):
            print(f"note: '{self.path}' was left by PID {stale}, which is not running; taking it over", flush=True)
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def _take(self) -> int:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise ConfigError(
                    f"run_dir '{self.path.parent}' is in use by another run (PID {holder}, lock '{self.path}'). "
                    f"Wait for it to end or stop it, or pick another run_dir."
                ) from None
            if self.path.exists() and self.path.stat().st_ino == os.fstat(fd).st_ino:
                return fd
            os.close(fd)  # the holder removed the file between our open and our lock: take the new one

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)


def take_run_dir_lock(run_dir: str) -> RunDirLock | None:
    """Rank 0 takes the lock; every rank raises its refusal, so no rank waits for a leader that left."""
    lock, problem = None, None
    if distributed.rank == 0:
        try:
            lock = RunDirLock(Path(run_dir))
        except ConfigError as e:
            problem = str(e)
    if distributed.world_size > 1:
        shared = [problem]
        torch.distributed.broadcast_object_list(shared, src=0)
        problem = shared[0]
    if problem:
        raise ConfigError(problem)
    return lock


def compile_layers(model, **compile_kwargs) -> None:
    """Compile stages 1 (norm, attention, routing) and 5 (combine, residual) of every layer. The experts
    (stage 3) stay eager: grouped matmuls over data-dependent group sizes gain nothing from tracing."""
    for layer in model.model.layers.values():
        layer.forward_stage1 = torch.compile(layer.forward_stage1, **compile_kwargs)
        if layer.is_moe:
            layer.forward_stage5 = torch.compile(layer.forward_stage5, **compile_kwargs)


def setup(cfg: PretrainLMCfg) -> Run:
    """Mesh, model, optimizer, data. Everything is validated before anything is written; then the run_dir lock is
    taken, and checkpoint.dir is checked (writable, room for one checkpoint) before the first step."""
    family = model_family(cfg.model.family)
    tc = cfg.training
    device = resolve_device(tc)
    dtype = compute_dtype(tc, device)
    setup_distributed(cfg.distributed, device)
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    check_layout(cfg, family)
    check_logging_packages(cfg.logging)
    dataset = make_dataset(cfg.data, cfg.model.vocab_size, tc.seed)
    lock = take_run_dir_lock(cfg.run_dir)
    try:
        return _setup_locked(cfg, family, device, dtype, dataset, lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _setup_locked(cfg: PretrainLMCfg, family, device: torch.device, dtype: torch.dtype, dataset, lock) -> Run:
    tc, d = cfg.training, distributed
    ckpt_dir = Path(cfg.checkpoint.dir or Path(cfg.run_dir) / "checkpoints")
    resume = latest_checkpoint(ckpt_dir) if ckpt_dir.is_dir() else None
    if resume is not None and cfg.checkpoint.resume == "never":
        raise CheckpointError(
            f"checkpoint.dir '{ckpt_dir}' already holds checkpoints and checkpoint.resume = \"never\". "
            f'Pick a new run_dir / checkpoint.dir, or set checkpoint.resume = "auto" to continue.'
        )
    for source in [resume, cfg.checkpoint.init_from or None]:
        if source is not None:
            check_model_matches(read_meta(source), cfg.model)
            break
    if resume is not None and not read_meta(resume).get("has_optimizer", True):
        raise CheckpointError(
            f"checkpoint '{resume}' holds model weights only (e.g. from `pithtrain convert`), so training cannot "
            f"resume from it. Start a new run_dir with checkpoint.init_from = '{resume}'."
        )

    torch.manual_seed(tc.seed)
    model, chunks = make_model(cfg, family, device)
    apply_fsdp(model, list(model.model.layers.values()), device)
    # this rank's weights and two AdamW moments of the same size: its part of a checkpoint, give or take the RNG
    local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    check_checkpoint_dir(ckpt_dir, 3 * sum(t.numel() * t.element_size() for t in local))
    fsdp = d.dp_size * d.cp_size * d.ep_size > 1
    precision.fp8 = tc.precision == "fp8"
    if tc.compile:
        # Under the pipeline with FSDP, FSDP units sit inside stage 1 (attention, norms, router: apply_fsdp) and
        # their hooks are dynamo-disabled, so the stage compiles as the pieces between them, not as one graph.
        compile_layers(model, fullgraph=not (fsdp and d.pp_size > 1))
    pipeline = None
    if d.pp_size > 1:
        shape = (tc.micro_batch_size, cfg.data.seq_len // d.cp_size, cfg.model.hidden_size)
        pipeline = DualPipeV(model, chunks, shape, device, defer_weight_grads=True)
    optimizer = make_optimizer(model, tc)
    sampler = ResumableSampler(len(dataset), tc.seed, shuffle=cfg.data.kind == "tokens")
    ckpt_group = torch.distributed.new_group(backend="gloo") if d.world_size > 1 else None
    return Run(cfg, model, optimizer, pipeline, dataset, sampler, device, dtype, ckpt_dir, resume, lock, ckpt_group)


def forward_backward(run: Run, consumed: int) -> tuple[torch.Tensor, int]:
    """Forward and backward over this rank's share of the global batch that starts at sample `consumed`:
    DP x EP split the sequences, CP splits each sequence (zigzag). Returns (this rank's loss sum, the whole
    batch's token count); gradients are those of (sum of token losses) / (token count)."""
    with fp8_linear.step_weight_cache():  # FP8 weights are quantised once for this step's micro-batches
        return _forward_backward(run, consumed)


def _forward_backward(run: Run, consumed: int) -> tuple[torch.Tensor, int]:
    cfg, d, tc, device = run.cfg, distributed, run.cfg.training, run.device
    local_batch = tc.global_batch_size // d.dp_ep_size
    input_ids, labels = get_batch(run.dataset, run.sampler, consumed + d.dp_ep_rank * local_batch, local_batch)
    input_ids = zigzag_split(input_ids, 1, d.cp_rank, d.cp_size).to(device)
    labels = zigzag_split(labels, 1, d.cp_rank, d.cp_size).to(device)
    num_tokens = (labels != -100).sum()
    if d.world_size > 1:
        torch.distributed.all_reduce(num_tokens, group=d.dp_cp_ep_group)
    num_tokens = int(num_tokens)
    positions = zigzag_positions(cfg.data.seq_len, d.cp_rank, d.cp_size, device).expand(tc.micro_batch_size, -1)
    # The load-balancing loss is averaged over all micro-batches of the step, like the token loss.
    aux_loss_scale = cfg.model.aux_loss_coef / (tc.global_batch_size // tc.micro_batch_size)
    ids_M, labels_M = input_ids.split(tc.micro_batch_size), labels.split(tc.micro_batch_size)
    if run.pipeline is not None:
        pos_M = [positions] * len(ids_M)
        return run.pipeline.step(ids_M, labels_M, pos_M, aux_loss_scale, num_tokens, run.dtype), num_tokens
    loss_sum = torch.zeros((), device=device)
    for ids, lab in zip(ids_M, labels_M):
        with torch.autocast(device.type, dtype=run.dtype, enabled=run.dtype != torch.float32):
            mb_loss = run.model(ids, lab, aux_loss_scale=aux_loss_scale, position_ids_BS=positions)
        (mb_loss / num_tokens).backward()
        loss_sum += mb_loss.detach()
    return loss_sum, num_tokens


def optimizer_step(run: Run, step: int, norm: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
    """Clip the gradients, update with optimizer step `step`'s learning rate, clear them. Returns (grad norm, lr).
    `norm`: the global gradient norm, when the caller computed it already (to check it before the update)."""
    tc = run.cfg.training
    if norm is None:
        norm = global_grad_norm(run.model.parameters(), run.cfg.distributed.hsdp)
    # The clipping factor multiplies the gradients inside AdamW's pass, not in a pass of its own.
    clip_coef = torch.clamp(tc.grad_clip / (norm + 1e-6), max=1.0) if tc.grad_clip else torch.ones_like(norm)
    lr = lr_at(step, tc)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    adamw_step(run.optimizer, clip_coef)
    run.optimizer.zero_grad(set_to_none=True)
    return norm, lr


def launch(cfg: PretrainLMCfg) -> list[dict]:
    """Train; returns the per-step metric records (every rank gets the same losses)."""
    run = setup(cfg)
    try:
        return train(run)
    finally:
        if run.lock is not None:
            run.lock.release()


def newest_checkpoint(run: Run, saver: AsyncCheckpointer) -> str:
    """For a stop message: the newest complete checkpoint, once the write in flight (if any) has ended. That write
    is finished, not abandoned, even on a second Ctrl-C (kill -9 at any moment of it leaves the previous one)."""
    while True:
        try:
            saver.wait()
            break
        except KeyboardInterrupt:
            continue
        except Exception:  # the write's own error is not what stopped the run
            break
    newest = latest_checkpoint(run.ckpt_dir) if run.ckpt_dir.is_dir() else None
    return f"'{newest}'" if newest else "none (a new run starts from step 0)"


def train(run: Run) -> list[dict]:
    cfg, family, tc, d = run.cfg, model_family(run.cfg.model.family), run.cfg.training, distributed
    model, optimizer, leader = run.model, run.optimizer, distributed.rank == 0
    step, consumed = 0, 0
    if run.resume is not None:
        load_checkpoint(run.resume, model, optimizer)
        meta = read_meta(run.resume)
        step, consumed = meta["step"], meta["consumed_samples"]
        if leader:
            print(f"resumed from {run.resume} at step {step}", flush=True)
            change = schedule_change(meta.get("schedule", {}), tc, step)
            if change:
                print(f"note: {change}", flush=True)
    elif cfg.checkpoint.init_from:
        load_checkpoint(read_meta(cfg.checkpoint.init_from)["path"], model)
        if leader:
            print(f"initialised model weights from {cfg.checkpoint.init_from}", flush=True)

    if leader:
        run_dir = Path(cfg.run_dir)
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
        flops = family.flops_per_token(cfg.model, cfg.data.seq_len)
        logger = ProgressLogger(
            cfg.logging, run_dir, flops, run.device, tc.max_steps, d.world_size, step, dataclasses.asdict(cfg)
        )
        n_params = sum(p.numel() for p in model.parameters())
        print(
            f"training {n_params:,} parameters (this rank) on {run.device} ({run.dtype}), world size "
            f"{d.world_size}: PP {d.pp_size} DP {d.dp_size} CP {d.cp_size} EP {d.ep_size}",
            flush=True,
        )
    meta = {"model": dataclasses.asdict(cfg.model), "schedule": schedule_of(tc)}
    saver = AsyncCheckpointer(run.ckpt_group, pin_memory=run.device.type == "cuda")
    records = []
    try:
        while step < tc.max_steps:
            # One optimizer step: forward/backward over the global batch; loss and gradient norm checked (one sync)
            # before the update, so a step that is not finite is neither applied nor saved; report; maybe save.
            loss_sum, num_tokens = forward_backward(run, consumed)
            if d.world_size > 1:
                torch.distributed.all_reduce(loss_sum)
            norm_t = global_grad_norm(model.parameters(), cfg.distributed.hsdp)
            loss, grad_norm = torch.stack([loss_sum.float() / num_tokens, norm_t.to(loss_sum.device)]).tolist()
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                what = f"loss {loss}" if not math.isfinite(loss) else f"gradient norm {grad_norm} (loss {loss:.4f})"
                raise TrainingStopped(
                    f"step {step + 1} is not finite ({what}); it was not applied and nothing of it was saved. "
                    f"Last good checkpoint: {newest_checkpoint(run, saver)}. Lower training.lr (now {tc.lr:g}) or "
                    f"raise training.warmup_steps, or check the data; the next run resumes from that checkpoint.",
                    exit_status=3,
                )
            _, lr = optimizer_step(run, step, norm_t)
            saver.prepare(model, optimizer)
            step += 1
            consumed += tc.global_batch_size
            record = {"step": step, "loss": loss}
            if leader:
                record = logger.log(step, loss, lr, grad_norm, tc.global_batch_size * cfg.data.seq_len)
            records.append(record)
            saver.poll()
            if step == tc.max_steps or (cfg.checkpoint.interval and step % cfg.checkpoint.interval == 0):
                t0 = time.perf_counter()
                extra = meta | {"consumed_samples": consumed}
                saver.save(run.ckpt_dir, step, model, optimizer, extra, cfg.checkpoint.keep_last)
                if leader:
                    print(f"checkpoint of step {step}: training paused {time.perf_counter() - t0:.2f}s to copy it; "
                          f"writing it in the background", flush=True)  # fmt: skip
                    logger.last_time = time.perf_counter()  # the copy is not part of the next step's time
        saved = saver.wait()
    except KeyboardInterrupt:
        raise TrainingStopped(
            f"interrupted (Ctrl-C) after step {step} of {tc.max_steps}; what came after the newest checkpoint is not "
            f"kept. Newest checkpoint: {newest_checkpoint(run, saver)}; run the same command to resume from it.",
            exit_status=130,
        ) from None
    finally:
        if leader:
            logger.close()
    if leader:
        if saved is not None:
            print(f"saved checkpoint {saved}", flush=True)
        print(logger.summary(saved or run.resume), flush=True)
    return records
