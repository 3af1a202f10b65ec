"""Checkpoints with PyTorch Distributed Checkpoint (DCP), written atomically.

Layout of a checkpoint directory:
    <dir>/step-00000100/   DCP files (model, optimizer, RNG) + meta.json (format, model config, step, data position,
                           learning-rate schedule, each file's size and CRC32)
    <dir>/latest           name of the newest complete checkpoint, replaced last
A save goes to `<dir>/.tmp-step-.../` and is renamed into place only when complete, then `latest`
is swapped with os.replace; a crash at any point leaves the previous checkpoint and pointer intact.
A step-* directory with meta.json is complete: resuming takes the newest one even where `latest` is
missing or older (a crash between the rename and the pointer update), and a save never replaces one.
Loading first checks every file against meta.json (present, size, CRC32) and DCP's metadata: a failure
there is corruption (`CorruptCheckpointError`); any later error is not, and is raised as it is.
Training saves with `AsyncCheckpointer`: the state is copied to host memory, and the same write (tmp, checksums,
rename, pointer) runs in a background thread, so the scheme above holds for a kill at any moment of it.
"""

import dataclasses
import errno
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict  # as dcp.async_save stages
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict
from torch.distributed.tensor import DTensor

from pithtrain.config import NonNegative, Positive, UserInputError
from pithtrain.contexts import distributed

CHECKPOINT_FORMAT = "pithtrain-dcp-v1"
# DCP warns that it saves from one process when no process group exists; that is the intent here.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")


class CheckpointError(UserInputError):
    pass


class CorruptCheckpointError(CheckpointError):
    """A checkpoint's files differ from what was saved (missing, short, checksum mismatch, unreadable metadata)."""


@dataclass
class CheckpointCfg:
    dir: str = ""
    """Where checkpoints are written and resumed from; empty means `<run_dir>/checkpoints`."""
    interval: NonNegative = 0
    """Save every this many steps; 0 saves only at the end of training."""
    keep_last: Positive = 2
    """How many checkpoints to keep; older ones are deleted once a newer one is complete."""
    resume: Literal["auto", "never"] = "auto"
    """`auto` continues from `<dir>/latest` when it exists; `never` refuses to run over existing checkpoints."""
    init_from: str = ""
    """A checkpoint (e.g. from `pithtrain convert hf-to-pithtrain`) whose model weights start a new run."""


def _is_complete(path: Path) -> bool:
    return path.is_dir() and (path / "meta.json").is_file()


def latest_checkpoint(ckpt_dir: str | Path) -> Path | None:
    """The checkpoint to resume from: the newest complete step-* directory. A `latest` pointer that names a
    missing one is refused (someone deleted it); one that is absent or older is reported and passed over."""
    ckpt_dir = Path(ckpt_dir)
    pointer = ckpt_dir / "latest"
    complete = sorted(p for p in ckpt_dir.glob("step-*") if _is_complete(p))
    newest = complete[-1] if complete else None
    if not pointer.is_file():
        if newest is not None and distributed.rank == 0:
            print(f"'{ckpt_dir}' has no 'latest' pointer; using its newest complete checkpoint, {newest.name}",
                  flush=True)  # fmt: skip
        return newest
    path = ckpt_dir / pointer.read_text().strip()
    if not _is_complete(path):
        raise CheckpointError(
            f"checkpoint pointer '{pointer}' names '{path.name}', which is missing or incomplete. "
            f"Point 'latest' at a complete step-* directory, or move the checkpoint directory away to start fresh."
        )
    if newest.name > path.name:
        if distributed.rank == 0:
            print(f"checkpoint pointer '{pointer}' names {path.name}, but {newest.name} is complete and newer "
                  f"(a save interrupted before the pointer moved); using {newest.name}", flush=True)  # fmt: skip
        return newest
    return path


def read_meta(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if (path / "latest").is_file() or (path.is_dir() and not (path / "meta.json").exists()):
        path = latest_checkpoint(path) or path
    meta_file = path / "meta.json"
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(
            f"'{path}' is not a readable pithtrain checkpoint ({e!r}): expected a step-* directory with "
            f"meta.json, or a checkpoint directory with a 'latest' pointer."
        ) from e
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT or not isinstance(meta.get("model"), dict):
        raise CheckpointError(
            f"'{meta_file}' is not a pithtrain checkpoint's meta.json (expected an object with format = "
            f"{CHECKPOINT_FORMAT!r} and a model table). Point at a checkpoint written by pithtrain."
        )
    return meta | {"path": str(path)}


def check_model_matches(meta: dict[str, Any], model_cfg: Any) -> None:
    """A checkpoint of another model is refused before anything is loaded, naming what differs."""
    ours = dataclasses.asdict(model_cfg)
    theirs = meta["model"]
    differ = [f"model.{k}: checkpoint {theirs.get(k)!r}, config {v!r}" for k, v in ours.items() if theirs.get(k) != v]
    if differ:
        raise CheckpointError(
            f"checkpoint '{meta['path']}' was written for another model ({'; '.join(differ)}). "
            f"Use the matching config, or another checkpoint.dir."
        )


def _barrier(group=None) -> None:
    if distributed.world_size > 1:
        torch.distributed.barrier(group)


def _gather(mine: list, group=None) -> list:
    """Every rank's list, concatenated in rank order (shared work split by rank, result known to all)."""
    if distributed.world_size == 1:
        return mine
    parts = [None] * distributed.world_size
    torch.distributed.all_gather_object(parts, mine, group)
    return [x for part in parts for x in part]


def file_crc32(path: Path) -> tuple[int, int]:
    """(size in bytes, CRC32) of a file, read in 16 MiB blocks."""
    crc, size, buf = 0, 0, bytearray(1 << 24)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            crc, size = zlib.crc32(memoryview(buf)[:n], crc), size + n
    return size, crc


def _checksums(directory: Path, group=None) -> dict[str, dict[str, int]]:
    """Size and CRC32 of every file DCP wrote, the files split across ranks."""
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    mine = [(n, *file_crc32(directory / n)) for n in names[distributed.rank :: distributed.world_size]]
    return {n: {"bytes": size, "crc32": crc} for n, size, crc in _gather(mine, group)}


def verify_checkpoint(path: str | Path) -> bool:
    """Check every file against meta.json (present, size, CRC32) and DCP's metadata; CorruptCheckpointError
    names each file that differs. Returns False for a checkpoint saved without checksums (nothing to check)."""
    path = Path(path)
    files = read_meta(path).get("files")
    problems = []
    for name in sorted(files or {})[distributed.rank :: distributed.world_size]:
        f, want = path / name, files[name]
        if not f.is_file():
            problems.append(f"'{f}' is missing")
        elif f.stat().st_size != want["bytes"]:
            problems.append(f"'{f}' is {f.stat().st_size} bytes, saved as {want['bytes']}")
        elif file_crc32(f)[1] != want["crc32"]:
            problems.append(f"'{f}' fails its CRC32 checksum (its bytes changed after the save)")
    problems = _gather(problems)
    if not problems:
        try:
            dcp.FileSystemReader(str(path)).read_metadata()
        except Exception as e:  # any unpickling failure: the metadata file is damaged
            problems.append(f"'{path / '.metadata'}' is unreadable ({type(e).__name__})")
    if problems:
        raise CorruptCheckpointError(
            f"checkpoint '{path}' is corrupt: {'; '.join(problems)}. Its weights cannot be trusted. Resume from "
            f"an earlier checkpoint (move this step directory away; the newest remaining complete one is used) or "
            f"point checkpoint.dir elsewhere."
        )
    return files is not None


def _canonical(model, optimizer) -> dict[str, Any]:
    """The state to save or load in place, in the mesh-independent layout: global layer names (pipeline
    stages keep them), FSDP shards as DTensors (DCP reshards them), and every stacked expert tensor split
    into one entry per expert under its global index (`...experts.gate_up_proj.17`), for weights and
    optimizer moments alike. All entries are views of the live tensors, so `dcp.load` fills them in place."""
    if optimizer is None:
        model_sd, optim_state = get_model_state_dict(model), {}
    else:
        model_sd, optim_sd = get_state_dict(model, optimizer)
        optim_state = optim_sd["state"]

    # models.DecoderLayer: a MoE layer's routed experts are `mlp.experts`, stacked from global `expert_offset`
    experts = {f"model.layers.{i}.mlp.experts.": x.mlp.experts for i, x in model.model.layers.items() if x.is_moe}

    def experts_of(key: str):
        return next((module for prefix, module in experts.items() if key.startswith(prefix)), None)

    def split(key: str, t: torch.Tensor, out: dict) -> None:
        local = t.to_local() if isinstance(t, DTensor) else t
        first = experts_of(key).expert_offset
        if isinstance(t, DTensor):  # FSDP's Shard(0) on the mesh's last dim: torch.chunk rows of this rank's experts
            shard_dim = t.device_mesh.ndim - 1  # (HSDP's first dim replicates)
            first += t.device_mesh.get_local_rank(shard_dim) * -(-t.shape[0] // t.device_mesh.size(shard_dim))
        for i in range(local.shape[0]):
            out[f"{key}.{first + i}"] = local[i]

    state: dict[str, Any] = {"model": {}, "optim": {}}
    for key, t in model_sd.items():
        if experts_of(key) is not None:
            split(key, t, state["model"])
        else:
            state["model"][key] = t
    for key, moments in optim_state.items():
        entry = state["optim"][key] = {}
        for name, t in moments.items():
            if experts_of(key) is not None and t.ndim > 0:
                split(key, t, entry.setdefault(name, {}))
            else:
                entry[name] = t
    if optimizer is None:
        del state["optim"]
    else:
        state["rng"] = {"cpu": torch.get_rng_state()}
    return state


def check_checkpoint_dir(ckpt_dir: Path, rank_bytes: int) -> None:
    """Before the first step, on every rank: `ckpt_dir` is (or can be made) a writable directory with room for one
    more checkpoint of every rank's `rank_bytes` (an old checkpoint is deleted only once the new one is complete)."""
    need = sum(_gather([rank_bytes]))
    problem = None
    if ckpt_dir.exists() and not ckpt_dir.is_dir():
        problem = f"checkpoint.dir '{ckpt_dir}' is an existing file. Point checkpoint.dir at a directory."
    else:
        try:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=ckpt_dir).close()
            free = shutil.disk_usage(ckpt_dir).free
        except OSError as e:
            problem = (
                f"checkpoint.dir '{ckpt_dir}' is not writable ({e.strerror}). Point checkpoint.dir at a directory "
                f"this user can create and write."
            )
        else:
            if free < need:
                problem = (
                    f"checkpoint.dir '{ckpt_dir}' has {free / 2**30:.2f} GiB free, but one checkpoint takes about "
                    f"{need / 2**30:.2f} GiB (weights and both AdamW moments in fp32). Free space there, or point "
                    f"checkpoint.dir at a larger disk."
                )
    problems = _gather([problem] if problem else [])
    if problems:
        raise CheckpointError(problems[0])


def _refuse_existing(ckpt_dir: Path, step: int) -> None:
    final = ckpt_dir / f"step-{step:08d}"
    if final.exists():  # resuming always starts from the newest complete checkpoint, so this is someone else's
        raise CheckpointError(
            f"'{final}' already exists and is never overwritten. Move it away, or use another checkpoint.dir."
        )


def _save_failure(e: BaseException, ckpt_dir: Path, tmp: Path, step: int, state_bytes: int) -> BaseException:
    """What to raise for an error while writing `tmp`: the error itself, out of DCP's wrapper (a Ctrl-C stays a
    Ctrl-C), or, when the disk is full, one line about space. The partial directory is removed either way."""
    if isinstance(e, dcp.api.CheckpointException):
        e = next(iter(e.failures.values()))[0]
    full = isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)
    # torch.save reports a short write as "unexpected pos" (a RuntimeError): a full disk is then told by what is left
    free = shutil.disk_usage(ckpt_dir).free
    shutil.rmtree(tmp, ignore_errors=True)
    if isinstance(e, KeyboardInterrupt) or not (full or free < state_bytes):
        return e
    return CheckpointError(
        f"no space left on the device of checkpoint.dir '{ckpt_dir}' while saving step {step} "
        f"({free / 2**20:.0f} MiB free, this rank's part of the checkpoint is {state_bytes / 2**20:.0f} MiB; "
        f"{type(e).__name__}: {str(e).splitlines()[0][:120]}). The previous checkpoint is intact. Free space there or "
        f"point checkpoint.dir at a larger disk, then run the same command to resume."
    )


def _state_bytes(state: dict) -> int:
    total = 0
    for value in state.values():
        if isinstance(value, dict):
            total += _state_bytes(value)
        elif isinstance(value, torch.Tensor):
            local = value.to_local() if isinstance(value, DTensor) else value
            total += local.numel() * local.element_size()
    return total


def write_checkpoint(ckpt_dir: Path, step: int, state: dict, meta: dict[str, Any], keep_last: int, group=None) -> Path:
    """Write `state` (the layout of `_canonical`) as `<ckpt_dir>/step-N`: into `.tmp-step-N`, checksummed, renamed
    into place, `latest` moved, older checkpoints pruned. Every rank calls this (DCP is collective, on `group`);
    rank 0 alone renames, moves the pointer and prunes."""
    name = f"step-{step:08d}"
    tmp, final = ckpt_dir / f".tmp-{name}", ckpt_dir / name
    if distributed.rank == 0:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # leftovers of a crashed save
    _barrier(group)
    try:
        dcp.save(state, checkpoint_id=str(tmp), process_group=group)
        _barrier(group)
        files = _checksums(tmp, group)
        if distributed.rank == 0:
            meta = {"format": CHECKPOINT_FORMAT, "step": step, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")} | meta
            meta |= {"has_optimizer": "optim" in state, "files": files}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    except (dcp.api.CheckpointException, OSError, RuntimeError) as e:
        raise _save_failure(e, ckpt_dir, tmp, step, _state_bytes(state)) from None
    if distributed.rank == 0:
        os.rename(tmp, final)
        pointer_tmp = ckpt_dir / ".latest.tmp"
        pointer_tmp.write_text(name)
        os.replace(pointer_tmp, ckpt_dir / "latest")
        for old in sorted(p for p in ckpt_dir.glob("step-*") if p.is_dir())[:-keep_last]:
            shutil.rmtree(old)
    _barrier(group)
    return final


def save_checkpoint(ckpt_dir: str | Path, step: int, model, optimizer, meta: dict[str, Any], keep_last: int) -> Path:
    """Save now and return when the checkpoint is complete (every rank calls this)."""
    _refuse_existing(Path(ckpt_dir), step)
    return write_checkpoint(Path(ckpt_dir), step, _canonical(model, optimizer), meta, keep_last)


class AsyncCheckpointer:
    """Saves that stop training only for a copy: `save` copies the state into host buffers (pinned when training
    on CUDA; allocated once, in the background by `prepare`, and reused) and returns; a background thread writes
    them exactly as `save_checkpoint` does (same files, CRC32s, rename, `latest`), its collectives on `group`, a
    process group of their own, so they never interleave with the training's. A kill at any moment of the write
    leaves the previous checkpoint as it was. One write at a time: `save` first waits for the previous one; `wait`
    returns the newest saved path and raises a failed write's error in the training thread."""

    def __init__(self, group=None, pin_memory: bool = False):
        self.group, self.pin_memory = group, pin_memory
        self.buffers: dict | None = None
        self.allocating: threading.Thread | None = None
        self.thread: threading.Thread | None = None
        self.written = threading.Event()  # set when the write in flight (if any) has ended
        self.error: BaseException | None = None
        self.saved: Path | None = None

    def prepare(self, model, optimizer) -> None:
        """Allocate the host buffers in the background (pinning gigabytes takes seconds), once the optimizer state
        exists (after the first step), so that the first save, too, stops training only for its copy."""
        if self.buffers is None and self.allocating is None:
            state = _canonical(model, optimizer)
            self.allocating = threading.Thread(target=self._allocate, args=(state,), name="checkpoint-buffers")
            self.allocating.start()

    def _allocate(self, state: dict) -> None:
        self.buffers = _create_cpu_state_dict(state, pin_memory=self.pin_memory)

    def save(self, ckpt_dir: Path, step: int, model, optimizer, meta: dict[str, Any], keep_last: int) -> None:
        self.wait()
        _refuse_existing(ckpt_dir, step)
        if self.allocating is not None:
            self.allocating.join()
        state = _canonical(model, optimizer)
        if self.buffers is None:  # no `prepare`, or its allocation failed (then this raises the reason)
            self.buffers = _create_cpu_state_dict(state, pin_memory=self.pin_memory)
        _copy_state_dict(state, self.buffers, non_blocking=self.pin_memory)
        if self.pin_memory:
            torch.cuda.synchronize()  # the copies are done before the next optimizer step changes the weights
        args = (ckpt_dir, step, self.buffers, meta, keep_last, self.group)
        self.written = threading.Event()
        self.thread = threading.Thread(target=self._write, args=args, name=f"checkpoint-{step}", daemon=True)
        self.thread.start()

    def _write(self, *args) -> None:
        try:
            self.saved = write_checkpoint(*args)
        except BaseException as e:  # handed to the training thread by `wait`
            self.error = e
        finally:
            self.written.set()

    def poll(self) -> None:
        """Raise a finished write's error now rather than at the next save."""
        if self.thread is not None and not self.thread.is_alive():
            self.wait()

    def wait(self) -> Path | None:
        if self.thread is not None:
            # Wait on the event, not on join alone: a Ctrl-C that interrupts Thread.join can leave the thread marked
            # finished while it still writes (CPython 3.11), and a retried join would then return before the write
            # ends; an interrupted Event.wait is safe to retry.
            self.written.wait()
            self.thread.join()
            self.thread = None
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return self.saved


def load_checkpoint(path: str | Path, model, optimizer=None) -> None:
    """Load model weights (and optimizer state and RNG, when an optimizer is given) in place, on any mesh.
    Corruption raises CorruptCheckpointError before anything is read into the model; an error after the checks
    passed (out of memory, a bug) propagates unchanged, with a note that the checkpoint itself is intact."""
    verified = verify_checkpoint(path)
    state = _canonical(model, optimizer)
    try:
        dcp.load(state, checkpoint_id=str(path))
    except Exception as e:
        e.add_note(
            f"pithtrain: checkpoint '{path}' passed its integrity checks (every file present, sizes and CRC32 as "
            f"saved, metadata readable): this error is not corruption, keep the checkpoint."
            if verified
            else f"pithtrain: checkpoint '{path}' has no checksums (saved by an older version), so corruption "
            f"cannot be told from other errors: keep it until the error above is understood."
        )
        raise
    if optimizer is not None:
        torch.set_rng_state(state["rng"]["cpu"])
