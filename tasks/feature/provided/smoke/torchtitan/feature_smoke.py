"""Registers TorchTitan DeepSeek-V3 flavors "feature_smoke" and "feature_top1" (below), read through
`experimental.custom_import`: the feature tasks' smoke shape, pithtrain's feature-smoke.toml in TorchTitan's terms
(MLA without a query LoRA, 4 layers of which 1 dense, 8 routed experts top-2 and 1 shared, softmax routing not
renormalised, a 2,048-token vocabulary, plain RoPE)."""

import dataclasses

from torchtitan.models.deepseek_v3 import deepseekv3_args
from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
from torchtitan.models.moe import MoEArgs

deepseekv3_args["feature_smoke"] = DeepSeekV3ModelArgs(
    vocab_size=2048,
    dim=128,
    inter_dim=256,
    moe_inter_dim=64,
    n_layers=4,
    n_dense_layers=1,
    n_heads=4,
    norm_eps=1e-6,
    moe_args=MoEArgs(
        num_experts=8,
        num_shared_experts=1,
        top_k=2,
        score_func="softmax",
        route_norm=False,
        route_scale=1.0,
        score_before_experts=False,
        load_balance_coeff=None,
    ),
    q_lora_rank=0,
    kv_lora_rank=32,
    qk_nope_head_dim=32,
    qk_rope_head_dim=16,
    v_head_dim=32,
    attn_type="sdpa",
    attn_mask_type="causal",
    max_seq_len=256,
    original_seq_len=256,
    rope_theta=10000.0,
    rope_factor=1.0,
    mscale=1.0,
)
# The same model routing each token to one expert, which a checker may run for one step to reach a routing case
# top-2 seldom makes.
deepseekv3_args["feature_top1"] = dataclasses.replace(
    deepseekv3_args["feature_smoke"], moe_args=dataclasses.replace(deepseekv3_args["feature_smoke"].moe_args, top_k=1)
)
