"""Registers TorchTitan DeepSeek-V3 flavor "deepseek_v2_lite_4l", read through `experimental.custom_import`.

The operate tasks' gpu1 shape: DeepSeek-V2-Lite (MLA without a query LoRA, 64 routed experts top-6 and 2 shared,
softmax routing not renormalised, its vocabulary) cut to 4 layers (1 dense, 3 MoE; 2.25B parameters) so that a
run fits one H200. TorchTitan applies YaRN only to sequences longer than original_seq_len (4096), so at the
tasks' sequence of 2048 the rotary embedding is plain RoPE. DeepSeek-V2 has no expert bias: TorchTitan's
load-balancing bias is off (load_balance_coeff None).
"""

from torchtitan.models.deepseek_v3 import deepseekv3_args
from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
from torchtitan.models.moe import MoEArgs

deepseekv3_args["deepseek_v2_lite_4l"] = DeepSeekV3ModelArgs(
    vocab_size=102400,
    dim=2048,
    inter_dim=10944,
    moe_inter_dim=1408,
    n_layers=4,
    n_dense_layers=1,
    n_heads=16,
    norm_eps=1e-6,
    moe_args=MoEArgs(
        num_experts=64,
        num_shared_experts=2,
        top_k=6,
        score_func="softmax",
        route_norm=False,
        route_scale=1.0,
        score_before_experts=False,
        load_balance_coeff=None,
    ),
    q_lora_rank=0,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    attn_type="sdpa",
    attn_mask_type="causal",
    original_seq_len=4096,
    rope_theta=10000.0,
    rope_factor=40.0,
    mscale=0.707,
)
