"""The model families, chosen by `model.family` in the one `if/elif` below."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pithtrain.config import ConfigError
from pithtrain.models import deepseek_v2, gpt_oss, qwen3_moe

KNOWN_FAMILIES = ("qwen3_moe", "deepseek_v2", "gpt_oss")


@dataclass(frozen=True)
class ModelFamily:
    """What the tasks need from a model file: its config class, model class and HF conversion."""

    name: str
    experts_key: str  # the config field holding the number of routed experts
    cfg_class: type
    model_class: type
    flops_per_token: Callable[[Any, int], float]
    cfg_from_hf: Callable[[dict], Any]
    cfg_to_hf: Callable[[Any], dict]
    state_dict_from_hf: Callable[[dict, Any], dict]
    state_dict_to_hf: Callable[[dict, Any], dict]


def model_family(name: object) -> ModelFamily:
    if name == "qwen3_moe":
        m, cfg_class, model_class = qwen3_moe, qwen3_moe.Qwen3MoeCfg, qwen3_moe.Qwen3MoeForCausalLM
        experts_key = "num_experts"
    elif name == "deepseek_v2":
        m, cfg_class, model_class = deepseek_v2, deepseek_v2.DeepseekV2Cfg, deepseek_v2.DeepseekV2ForCausalLM
        experts_key = "n_routed_experts"
    elif name == "gpt_oss":
        m, cfg_class, model_class = gpt_oss, gpt_oss.GptOssCfg, gpt_oss.GptOssForCausalLM
        experts_key = "num_local_experts"
    else:
        raise ConfigError(f"model.family = {name!r} is unknown. Known families: {', '.join(KNOWN_FAMILIES)}.")
    return ModelFamily(
        name,
        experts_key,
        cfg_class,
        model_class,
        m.flops_per_token,
        m.cfg_from_hf,
        m.cfg_to_hf,
        m.state_dict_from_hf,
        m.state_dict_to_hf,
    )
