"""The weight mapping between Megatron-Core's GPT model (the local spec: MLA without a query LoRA, SwiGLU, SequentialMLP
experts, shared experts) and Hugging Face's DeepseekV2ForCausalLM, used by the Megatron-LM golds of Train & Evaluate
(export_hf.py) and Collect Routing Trace (hf_to_megatron.py). Megatron-LM ships no converter for this model.

Names, one layer (Megatron-Core <- Hugging Face):
  input_layernorm / pre_mlp_layernorm            <- input_layernorm / post_attention_layernorm
  self_attention.linear_q_proj                   <- self_attn.q_proj (per head: 128 nope, then 64 rope)
  self_attention.linear_kv_down_proj             <- self_attn.kv_a_proj_with_mqa (kv_lora_rank, then the rope key)
  self_attention.kv_layernorm                    <- self_attn.kv_a_layernorm (built by --qk-layernorm)
  self_attention.linear_kv_up_proj               <- self_attn.kv_b_proj (per head: 128 key nope, then 128 value)
  self_attention.linear_proj                     <- self_attn.o_proj
  mlp.linear_fc1 = [gate; up], mlp.linear_fc2    <- mlp.gate_proj, mlp.up_proj, mlp.down_proj (dense layers)
  mlp.router                                     <- mlp.gate
  mlp.experts.local_experts.E.linear_fc1/fc2     <- mlp.experts.E.gate_proj + up_proj / down_proj
  mlp.shared_experts.linear_fc1/fc2              <- mlp.shared_experts.gate_proj + up_proj / down_proj
Megatron applies MLA's RoPE to the rope half de-interleaved (x[0::2], x[1::2]) and Hugging Face's DeepseekV2 to its
complex pairs: the same rotation of queries and keys alike, so the weights map without a permutation.
"""

import re
from pathlib import Path

import torch

LINEAR_EXTRA_STATE = re.compile(r"(^|\.)(linear_[a-z0-9_]+|output_layer)\.weight$")
"""Megatron's local linear layers keep an `_extra_state` (None) that a strict load_state_dict expects."""

ATTN = {
    "input_layernorm.weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "self_attention.linear_q_proj.weight": "self_attn.q_proj.weight",
    "self_attention.linear_kv_down_proj.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "self_attention.kv_layernorm.weight": "self_attn.kv_a_layernorm.weight",
    "self_attention.linear_kv_up_proj.weight": "self_attn.kv_b_proj.weight",
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
}
TOP = {
    "embedding.word_embeddings.weight": "model.embed_tokens.weight",
    "decoder.final_layernorm.weight": "model.norm.weight",
    "output_layer.weight": "lm_head.weight",
}


def read_hf(directory: Path) -> dict[str, torch.Tensor]:
    """A Hugging Face checkpoint's tensors by name, experts one by one (a fused `experts.gate_up_proj` (E, 2I, H) and
    `experts.down_proj` (E, H, I), as transformers 5 holds them in memory, are split)."""
    from safetensors.torch import load_file

    state = {k: v for f in sorted(Path(directory).glob("*.safetensors")) for k, v in load_file(f).items()}
    for key in [k for k in state if k.endswith("mlp.experts.gate_up_proj")]:
        prefix = key[: -len("gate_up_proj")]
        gate_up, down = state.pop(key), state.pop(prefix + "down_proj")
        for e in range(gate_up.shape[0]):
            gate, up = gate_up[e].chunk(2, dim=0)
            state[f"{prefix}{e}.gate_proj.weight"], state[f"{prefix}{e}.up_proj.weight"] = gate, up
            state[f"{prefix}{e}.down_proj.weight"] = down[e]
    if not state:
        raise SystemExit(f"no *.safetensors in {directory}")
    return state


def hf_to_megatron(hf: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor | None]:
    """Hugging Face DeepseekV2 tensors -> Megatron-Core GPTModel state dict (with the linear layers' extra state)."""
    hf = dict(hf)
    out: dict[str, torch.Tensor | None] = {m: hf.pop(h) for m, h in TOP.items()}
    for i in range(num_layers):
        src, dst = f"model.layers.{i}.", f"decoder.layers.{i}."
        for m, h in ATTN.items():
            out[dst + m] = hf.pop(src + h)
        if src + "mlp.gate.weight" in hf:  # an MoE layer
            out[dst + "mlp.router.weight"] = hf.pop(src + "mlp.gate.weight")
            experts = sorted({int(k.split(".")[5]) for k in hf if k.startswith(src + "mlp.experts.")})
            for e in experts:
                hp = f"{src}mlp.experts.{e}."
                mp = f"{dst}mlp.experts.local_experts.{e}."
                out[mp + "linear_fc1.weight"] = torch.cat(
                    [hf.pop(hp + "gate_proj.weight"), hf.pop(hp + "up_proj.weight")]
                )
                out[mp + "linear_fc2.weight"] = hf.pop(hp + "down_proj.weight")
            pairs = [("mlp.shared_experts.", "mlp.shared_experts.")]
        else:
            pairs = [("mlp.", "mlp.")]
        for mp, hp in pairs:
            out[dst + mp + "linear_fc1.weight"] = torch.cat(
                [hf.pop(src + hp + "gate_proj.weight"), hf.pop(src + hp + "up_proj.weight")]
            )
            out[dst + mp + "linear_fc2.weight"] = hf.pop(src + hp + "down_proj.weight")
    if hf:
        raise SystemExit(f"Hugging Face tensors left unmapped: {sorted(hf)[:8]}")
    for key in [k for k in out if LINEAR_EXTRA_STATE.search(k)]:
        out[key[: -len("weight")] + "_extra_state"] = None
    return out


def megatron_to_hf(state: dict, num_layers: int) -> dict[str, torch.Tensor]:
    """Megatron-Core GPTModel state dict -> Hugging Face DeepseekV2 tensors (experts one by one)."""
    mc = {k.removeprefix("module."): v for k, v in state.items() if not k.endswith("_extra_state")}
    out = {h: mc.pop(m) for m, h in TOP.items()}
    for i in range(num_layers):
        src, dst = f"decoder.layers.{i}.", f"model.layers.{i}."
        for m, h in ATTN.items():
            out[dst + h] = mc.pop(src + m)
        if src + "mlp.router.weight" in mc:
            out[dst + "mlp.gate.weight"] = mc.pop(src + "mlp.router.weight")
            experts = sorted({int(k.split(".")[6]) for k in mc if k.startswith(src + "mlp.experts.local_experts.")})
            for e in experts:
                mp, hp = f"{src}mlp.experts.local_experts.{e}.", f"{dst}mlp.experts.{e}."
                out[hp + "gate_proj.weight"], out[hp + "up_proj.weight"] = mc.pop(mp + "linear_fc1.weight").chunk(2)
                out[hp + "down_proj.weight"] = mc.pop(mp + "linear_fc2.weight")
            pairs = [("mlp.shared_experts.", "mlp.shared_experts.")]
        else:
            pairs = [("mlp.", "mlp.")]
        for mp, hp in pairs:
            out[dst + hp + "gate_proj.weight"], out[dst + hp + "up_proj.weight"] = mc.pop(
                src + mp + "linear_fc1.weight"
            ).chunk(2)
            out[dst + hp + "down_proj.weight"] = mc.pop(src + mp + "linear_fc2.weight")
    if mc:
        raise SystemExit(f"Megatron tensors left unmapped: {sorted(mc)[:8]}")
    return out
