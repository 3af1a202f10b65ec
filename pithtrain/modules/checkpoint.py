"""Checkpoints with PyTorch Distributed Checkpoint (DCP), written atomically.

Layout of a checkpoint directory:
    <dir>/step-00000100/   DCP files (model, optimizer, RNG) + meta.json (format, model config, step, data position)
    <dir>/latest           name of the newest complete checkpoint, replaced last
A save goes to `<dir>/.tmp-step-.../` and is renamed into place only when complete, then `latest`
is swapped with os.replace; a crash at any point leaves the previous checkpoint and pointer intact.
"""

import dataclasses
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict
from torch.distributed.tensor import DTensor

from pithtrain.config import NonNegative, Positive, UserInputError
from pithtrain.contexts import distributed

CHECKPOINT_FORMAT = "pithtrain-dcp-v1"
# DCP warns that it saves from one process when no process group exists; that is the intent here.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")


class CheckpointError(UserInputError):
    pass


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


def latest_checkpoint(ckpt_dir: str | Path) -> Path | None:
    pointer = Path(ckpt_dir) / "latest"
    if not pointer.is_file():
        return None
    path = Path(ckpt_dir) / pointer.read_text().strip()
    if not (path / "meta.json").is_file():
        raise CheckpointError(
            f"checkpoint pointer '{pointer}' names '{path.name}', which is missing or incomplete. "
            f"Point 'latest' at a complete step-* directory, or move the checkpoint directory away to start fresh."
        )
    return path


def read_meta(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if (path / "latest").is_file():
        path = latest_checkpoint(path)
    try:
        meta = json.loads((path / "meta.json").read_text())
        assert meta["format"] == CHECKPOINT_FORMAT
        return meta | {"path": str(path)}
    except (OSError, ValueError, KeyError, AssertionError) as e:
        raise CheckpointError(
            f"'{path}' is not a readable pithtrain checkpoint ({e!r}): expected a step-* directory with "
            f"meta.json, or a checkpoint directory with a 'latest' pointer."
        ) from e


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

    def split(key: str, t: torch.Tensor, out: dict) -> None:
        local = t.to_local() if isinstance(t, DTensor) else t
        first = model.get_submodule(key.split(".mlp.experts.")[0] + ".mlp.experts").expert_offset
        if isinstance(t, DTensor):  # FSDP's Shard(0) on the mesh's last dim: torch.chunk rows of this rank's experts
            shard_dim = t.device_mesh.ndim - 1  # (HSDP's first dim replicates)
            first += t.device_mesh.get_local_rank(shard_dim) * -(-t.shape[0] // t.device_mesh.size(shard_dim))
        for i in range(local.shape[0]):
            out[f"{key}.{first + i}"] = local[i]

    state: dict[str, Any] = {"model": {}, "optim": {}}
    for key, t in model_sd.items():
        if ".mlp.experts." in key:
            split(key, t, state["model"])
        else:
            state["model"][key] = t
    for key, moments in optim_state.items():
        entry = state["optim"][key] = {}
        for name, t in moments.items():
            if ".mlp.experts." in key and t.ndim > 0:
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
    if distributed.rank == 0:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # leftovers of a crashed save
    _barrier()
    dcp.save(_canonical(model, optimizer), checkpoint_id=str(tmp))
    _barrier()
    if distributed.rank == 0:
        meta = {"format": CHECKPOINT_FORMAT, "step": step, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")} | meta
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        if final.exists():  # re-saving a step (a resumed run that ends where it started): replace it
            shutil.rmtree(final)
        os.rename(tmp, final)
        pointer_tmp = ckpt_dir / ".latest.tmp"
        pointer_tmp.write_text(name)
        os.replace(pointer_tmp, ckpt_dir / "latest")
        for old in sorted(p for p in ckpt_dir.glob("step-*") if p.is_dir())[:-keep_last]:
            shutil.rmtree(old)
    _barrier()
    return final


def load_checkpoint(path: str | Path, model, optimizer=None) -> None:
    """Load model weights (and optimizer state and RNG, when an optimizer is given) in place, on any mesh."""
    try:
        state = _canonical(model, optimizer)
        dcp.load(state, checkpoint_id=str(path))
        if optimizer is not None:
            torch.set_rng_state(state["rng"]["cpu"])
    except (CheckpointException, RuntimeError, ValueError, KeyError, OSError, EOFError) as e:
        raise CheckpointError(
            f"checkpoint '{path}' could not be loaded ({type(e).__name__}: {str(e)[:300]}). It is corrupt or "
            f"incomplete: point checkpoint.dir elsewhere, or delete this step directory and its 'latest' pointer."
        ) from e
