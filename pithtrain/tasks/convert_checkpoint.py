"""Convert checkpoints between Hugging Face safetensors and pithtrain's DCP format.

`hf-to-pithtrain`: a local Hugging Face model directory (config.json + *.safetensors) becomes a
weights-only pithtrain checkpoint, usable as `checkpoint.init_from`. `pithtrain-to-hf`: the model
weights of a training checkpoint become a Hugging Face directory that `transformers` loads.
"""

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import load_file, save_file

from pithtrain.config import ConfigError, load_dataclass
from pithtrain.models import model_family
from pithtrain.modules.checkpoint import CheckpointError, load_checkpoint, read_meta, save_checkpoint

HF_FAMILIES = {"qwen3_moe": "qwen3_moe", "deepseek_v2": "deepseek_v2", "gpt_oss": "gpt_oss"}  # HF model_type -> family
SHARD_BYTES = 5 * 2**30


@dataclass
class ConvertCheckpointCfg:
    direction: Literal["hf-to-pithtrain", "pithtrain-to-hf"]
    """Which way to convert."""
    source: str
    """HF model directory, or pithtrain checkpoint (a step-* directory or a directory with `latest`)."""
    output: str
    """Directory to create; must not exist yet."""
    dtype: Literal["float32", "bfloat16"] = "bfloat16"
    """Precision of the exported Hugging Face weights (pithtrain checkpoints are always fp32)."""
    tokenizer: str = ""
    """pithtrain-to-hf: a tokenizer directory whose files are copied next to the weights."""


def read_hf_config(directory: Path) -> dict:
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"'{directory}' has no config.json: pass a Hugging Face model directory.")
    try:
        return json.loads(config_file.read_text())
    except ValueError as e:
        raise CheckpointError(f"'{config_file}' is not valid JSON ({e}).") from e


def check_hf_shards(directory: Path) -> None:
    """Every shard that model.safetensors.index.json names is present (a download cut short leaves some out)."""
    index_file = directory / "model.safetensors.index.json"
    if not index_file.is_file():
        return
    try:
        shards = sorted(set(json.loads(index_file.read_text())["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"'{index_file}' is not a safetensors index with a weight_map ({e!r}).") from e
    missing = [name for name in shards if not (directory / name).is_file()]
    if missing:
        raise CheckpointError(
            f"'{directory / missing[0]}' is missing: {len(missing)} of the {len(shards)} shards that "
            f"'{index_file.name}' names are absent ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}). "
            f"Download the missing shards into '{directory}'."
        )


def read_hf_weights(directory: Path) -> dict[str, torch.Tensor]:
    check_hf_shards(directory)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"'{directory}' has no *.safetensors weights.")
    state = {}
    for f in files:
        try:
            state.update(load_file(f))
        except Exception as e:  # safetensors raises its own error type for a damaged header
            raise CheckpointError(
                f"'{f}' is not a readable safetensors file ({e}). Re-download or re-export it."
            ) from e
    return state


def hf_to_model_state(family, hf_state: dict, model_cfg, model, source: Path) -> dict[str, torch.Tensor]:
    """The weights in our layout, checked name by name and shape by shape against the model that config.json
    describes; a difference is one line naming the first tensor (not torch's dump of every one)."""
    try:
        state = family.state_dict_from_hf(hf_state, model_cfg)
    except KeyError as e:
        raise CheckpointError(
            f"the weights in '{source}' lack tensor {e.args[0]!r}, which the model that its config.json describes "
            f"needs: config.json and the weights are of different models. Use the config.json the weights came with."
        ) from e
    ours = model.state_dict()
    missing, unexpected = sorted(set(ours) - set(state)), sorted(set(state) - set(ours))
    wrong = [k for k in ours if k in state and state[k].shape != ours[k].shape]
    if missing or unexpected or wrong:
        first = (
            f"{wrong[0]}: weights {tuple(state[wrong[0]].shape)}, config.json {tuple(ours[wrong[0]].shape)}"
            if wrong
            else f"{(missing or unexpected)[0]} {'missing from the weights' if missing else 'not in the model'}"
        )
        raise CheckpointError(
            f"the weights in '{source}' do not fit the model that its config.json describes: {len(wrong)} tensors "
            f"differ in shape, {len(missing)} are missing, {len(unexpected)} are extra (first: {first}). Use the "
            f"config.json the weights came with."
        )
    return {k: v.float() for k, v in state.items()}


def write_hf_dir(directory: Path, hf_config: dict, state: dict[str, torch.Tensor]) -> None:
    shards, current, size = [], {}, 0
    for name in sorted(state):
        nbytes = state[name].numel() * state[name].element_size()
        if current and size + nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[name], size = state[name], size + nbytes
    shards.append(current)
    if len(shards) == 1:
        save_file(shards[0], directory / "model.safetensors", metadata={"format": "pt"})
    else:
        weight_map = {}
        for i, shard in enumerate(shards):
            fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, directory / fname, metadata={"format": "pt"})
            weight_map |= {k: fname for k in shard}
        index = {
            "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
            "weight_map": weight_map,
        }
        (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    (directory / "config.json").write_text(json.dumps(hf_config, indent=1))


def launch(cfg: ConvertCheckpointCfg) -> Path:
    source, out = Path(cfg.source), Path(cfg.output)
    if out.exists():
        raise ConfigError(f"output '{out}' already exists; pick a new directory (nothing was written).")
    tmp = out.parent / f".tmp-{out.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    if cfg.direction == "hf-to-pithtrain":
        hf_config = read_hf_config(source)
        family_name = HF_FAMILIES.get(hf_config.get("model_type"))
        if family_name is None:
            raise CheckpointError(
                f"'{source}' holds model_type {hf_config.get('model_type')!r}; "
                f"pithtrain converts: {', '.join(HF_FAMILIES)}."
            )
        family = model_family(family_name)
        model_cfg = family.cfg_from_hf(hf_config)  # refuses what it cannot convert before any weight is read
        hf_state = read_hf_weights(source)
        model = family.model_class(model_cfg)
        model.load_state_dict(hf_to_model_state(family, hf_state, model_cfg, model, source))
        try:
            save_checkpoint(tmp, 0, model, None, {"model": dataclasses.asdict(model_cfg), "consumed_samples": 0}, 1)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    elif cfg.direction == "pithtrain-to-hf":
        meta = read_meta(source)
        family = model_family(meta["model"].get("family"))
        model_cfg = load_dataclass(family.cfg_class, meta["model"], prefix="model.")
        model = family.model_class(model_cfg)
        load_checkpoint(meta["path"], model)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[cfg.dtype]
        hf_state = {k: v.to(dtype) for k, v in family.state_dict_to_hf(model.state_dict(), model_cfg).items()}
        hf_config = family.cfg_to_hf(model_cfg) | {"torch_dtype": cfg.dtype}
        try:
            tmp.mkdir(parents=True)
            write_hf_dir(tmp, hf_config, hf_state)
            if cfg.tokenizer:
                if not (Path(cfg.tokenizer) / "tokenizer.json").is_file():
                    raise CheckpointError(f"tokenizer directory '{cfg.tokenizer}' has no tokenizer.json.")
                for f in Path(cfg.tokenizer).glob("*.json"):
                    if f.name != "config.json":
                        shutil.copy(f, tmp / f.name)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {out}", flush=True)
    return out
