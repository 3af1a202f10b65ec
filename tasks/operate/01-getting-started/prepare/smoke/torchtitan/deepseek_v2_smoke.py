"""Registers TorchTitan DeepSeek-V3 flavor "deepseek_v2_smoke", read through `experimental.custom_import`.

The operate tasks' smoke shape (pithtrain's smoke.toml): a tiny DeepSeek-V2 (multi-head latent attention; 1 dense
layer, then 2 MoE layers of 8 routed experts, top-2, renormalised, and 1 shared expert) with the shipped tokenizer's
vocabulary; plain RoPE (TorchTitan applies YaRN only beyond original_seq_len). DeepSeek-V2 has no expert bias:
TorchTitan's load-balancing bias is off (load_balance_coeff None).
"""

from torchtitan.models.deepseek_v3 import deepseekv3_args
from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
from torchtitan.models.moe import MoEArgs

deepseekv3_args["deepseek_v2_smoke"] = DeepSeekV3ModelArgs(
    vocab_size=2048,
    dim=64,
    inter_dim=128,
    moe_inter_dim=32,
    n_layers=3,
    n_dense_layers=1,
    n_heads=2,
    norm_eps=1e-6,
    moe_args=MoEArgs(
        num_experts=8,
        num_shared_experts=1,
        top_k=2,
        score_func="softmax",
        route_norm=True,
        route_scale=1.0,
        score_before_experts=False,
        load_balance_coeff=None,
    ),
    q_lora_rank=0,
    kv_lora_rank=16,
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,
    v_head_dim=16,
    attn_type="sdpa",
    attn_mask_type="causal",
    original_seq_len=256,
    rope_theta=10000.0,
    rope_factor=1.0,
)
