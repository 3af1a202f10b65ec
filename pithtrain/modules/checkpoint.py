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
"""

import dataclasses
import json
import os
import shutil
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed.checkpoint as dcp
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


def _barrier() -> None:
    if distributed.world_size > 1:
        torch.distributed.barrier()


def _gather(mine: list) -> list:
    """Every rank's list, concatenated in rank order (shared work split by rank, result known to all)."""
    if distributed.world_size == 1:
        return mine
    parts = [None] * distributed.world_size
    torch.distributed.all_gather_object(parts, mine)
    return [x for part in parts for x in part]


def file_crc32(path: Path) -> tuple[int, int]:
    """(size in bytes, CRC32) of a file, read in 16 MiB blocks."""
    crc, size, buf = 0, 0, bytearray(1 << 24)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            crc, size = zlib.crc32(memoryview(buf)[:n], crc), size + n
    return size, crc


def _checksums(directory: Path) -> dict[str, dict[str, int]]:
    """Size and CRC32 of every file DCP wrote, the files split across ranks."""
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    mine = [(n, *file_crc32(directory / n)) for n in names[distributed.rank :: distributed.world_size]]
    return {n: {"bytes": size, "crc32": crc} for n, size, crc in _gather(mine)}


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


def save_checkpoint(ckpt_dir: str | Path, step: int, model, optimizer, meta: dict[str, Any], keep_last: int) -> Path:
    """Every rank calls this (DCP is collective); rank 0 alone renames and moves the `latest` pointer."""
    ckpt_dir = Path(ckpt_dir)
    name = f"step-{step:08d}"
    tmp, final = ckpt_dir / f".tmp-{name}", ckpt_dir / name
    if final.exists():  # resuming always starts from the newest complete checkpoint, so this is someone else's
        raise CheckpointError(
            f"'{final}' already exists and is never overwritten. Move it away, or use another checkpoint.dir."
        )
    if distributed.rank == 0:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # leftovers of a crashed save
    _barrier()
    dcp.save(_canonical(model, optimizer), checkpoint_id=str(tmp))
    _barrier()
    files = _checksums(tmp)
    if distributed.rank == 0:
        meta = {"format": CHECKPOINT_FORMAT, "step": step, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")} | meta
        meta |= {"has_optimizer": optimizer is not None, "files": files}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        os.rename(tmp, final)
        pointer_tmp = ckpt_dir / ".latest.tmp"
        pointer_tmp.write_text(name)
        os.replace(pointer_tmp, ckpt_dir / "latest")
        for old in sorted(p for p in ckpt_dir.glob("step-*") if p.is_dir())[:-keep_last]:
            shutil.rmtree(old)
    _barrier()
    return final


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
