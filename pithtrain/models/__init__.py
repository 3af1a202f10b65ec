"""The model families, chosen by `model.family` in the one `if/elif` below."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pithtrain.config import ConfigError
from pithtrain.models import qwen3_moe

KNOWN_FAMILIES = ("qwen3_moe",)


@dataclass(frozen=True)
class ModelFamily:
    """What the tasks need from a model file: its config class, model class and HF conversion."""

    name: str
    cfg_class: type
    model_class: type
    flops_per_token: Callable[[Any, int], float]
    cfg_from_hf: Callable[[dict], Any]
    cfg_to_hf: Callable[[Any], dict]
    state_dict_from_hf: Callable[[dict, Any], dict]
    state_dict_to_hf: Callable[[dict, Any], dict]


def model_family(name: object) -> ModelFamily:
    if name == "qwen3_moe":
        m = qwen3_moe
        return ModelFamily(
            name,
            m.Qwen3MoeCfg,
            m.Qwen3MoeForCausalLM,
            m.flops_per_token,
            m.cfg_from_hf,
            m.cfg_to_hf,
            m.state_dict_from_hf,
            m.state_dict_to_hf,
        )
    raise ConfigError(f"model.family = {name!r} is unknown. Known families: {', '.join(KNOWN_FAMILIES)}.")
