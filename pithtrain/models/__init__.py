"""The model families, chosen by `model.family` in the one `if/elif` below, and the contract between a family's
decoder layer and the engine (`DecoderLayer`): the pipeline, FSDP wrapping, compilation and the checkpoint rely on
what it names and on nothing else of a layer."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from pithtrain.config import ConfigError
from pithtrain.models import deepseek_v2, gpt_oss, qwen3_moe

KNOWN_FAMILIES = ("qwen3_moe", "deepseek_v2", "gpt_oss")


@runtime_checkable
class Experts(Protocol):
    """A layer's routed experts (`mlp.experts`): every parameter is stacked on dim 0 over this rank's experts, the
    first being global expert `expert_offset` (the checkpoint stores one entry per global expert)."""

    expert_offset: int


@runtime_checkable
class MoeBlock(Protocol):
    """A MoE layer's `mlp`. Its own parameters (the router) are used only inside `route`; `shared_experts`, when not
    None, is a module that stage 1 calls directly (so FSDP makes it a unit of its own)."""

    experts: nn.Module
    shared_experts: nn.Module | None

    def route(self, x_BSD: torch.Tensor, aux_loss_scale: float) -> tuple[torch.Tensor, torch.Tensor]: ...


@runtime_checkable
class DecoderLayer(Protocol):
    """A decoder layer in `model.model.layers`, run by the pipeline stage by stage (never through `forward`):
    1 norm, attention, residual, norm, routing -> (h_BSD residual, n_TD expert input, topk_ids_TK, topk_w_TK);
    2 dispatch to experts (engine); 3 experts; 4 combine (engine); 5 weighted sum into the residual.
    A dense layer (`is_moe` False, `num_experts` 0) is all of stage 1, which returns (out_BSD, None, None, None).
    A MoE layer's `mlp` is a `MoeBlock`. All weights live in submodules, none on the layer itself."""

    is_moe: bool
    num_experts: int  # routed experts in total, over all ranks
    mlp: nn.Module

    def forward_stage1(self, x_BSD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, aux_loss_scale: float = 0.0):
        """Stage 1 (see above)."""

    def forward_stage3(self, x_ND: torch.Tensor, tokens_per_expert_E: torch.Tensor) -> torch.Tensor: ...

    def forward_stage5(self, h_BSD: torch.Tensor, y_TKD: torch.Tensor, topk_w_TK: torch.Tensor) -> torch.Tensor: ...

    def reference_forward(self, x_BSD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, aux_loss_scale: float = 0.0):
        """The eager oracle of the whole layer."""


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
