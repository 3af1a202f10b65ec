"""DeepSeek-V2: the stage split vs reference_forward, dense layers, group-limited routing, the example configs,
a tiny model that learns, and parity with Hugging Face transformers both ways on random weights."""

import dataclasses

import pytest
import torch
from conftest import REPO, TINY_TOKENS
from hf_parity import check_hf_round_trip

from pithtrain.models.deepseek_v2 import DeepseekV2Cfg, DeepseekV2ForCausalLM, cfg_from_hf, flops_per_token
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

CFG = DeepseekV2Cfg(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=3, first_k_dense_replace=1,
                    num_attention_heads=4, q_lora_rank=12, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                    v_head_dim=6, n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=3,
                    moe_intermediate_size=16, topk_method="group_limited_greedy", n_group=4, topk_group=2,
                    routed_scaling_factor=2.5, rope_factor=4.0, rope_original_max_position_embeddings=16,
                    rope_mscale=1.0, rope_mscale_all_dim=0.5, max_position_embeddings=64)  # fmt: skip


def test_dense_layers_do_everything_in_stage1():
    model = DeepseekV2ForCausalLM(CFG)
    assert [layer.is_moe for layer in model.model.layers.values()] == [False, True, True]
    x_BSD = torch.randn(2, 5, CFG.hidden_size)
    cos, sin = model.rope(torch.zeros(2, 5, dtype=torch.long))
    dense, moe = model.model.layers["0"], model.model.layers["1"]
    out_BSD, n_TD, ids, w = dense.forward_stage1(x_BSD, cos, sin)
    assert n_TD is None and ids is None and w is None and torch.equal(out_BSD, dense(x_BSD, cos, sin))
    h_BSD, n_TD, ids_TK, w_TK = moe.forward_stage1(x_BSD, cos, sin)
    assert n_TD.shape == (10, CFG.hidden_size) and ids_TK.shape == w_TK.shape == (10, CFG.num_experts_per_tok)


def test_group_limited_routing_and_scaling():
    moe = DeepseekV2ForCausalLM(CFG).model.layers["1"].mlp
    torch.nn.init.normal_(moe.gate.weight, std=0.3)
    x_TD = torch.randn(200, CFG.hidden_size)
    ids_TK, w_TK = moe.route(x_TD[None], 0.0)
    groups_TK = ids_TK // (CFG.n_routed_experts // CFG.n_group)
    assert all(len(set(g.tolist())) <= CFG.topk_group for g in groups_TK)
    assert len(set(groups_TK.flatten().tolist())) == CFG.n_group  # every group gets used by someone
    probs_TE = (x_TD @ moe.gate.weight.T).softmax(-1)  # weights: the softmax over all experts, not renormalised
    torch.testing.assert_close(w_TK, CFG.routed_scaling_factor * probs_TE.gather(1, ids_TK))
    free_groups_TK = probs_TE.topk(CFG.num_experts_per_tok).indices // (CFG.n_routed_experts // CFG.n_group)
    assert any(len(set(g.tolist())) > CFG.topk_group for g in free_groups_TK)  # the limit did bind


def test_sigmoid_scores_renormalised_then_scaled():
    cfg = dataclasses.replace(CFG, scoring_func="sigmoid", norm_topk_prob=True, topk_method="greedy")
    moe = DeepseekV2ForCausalLM(cfg).model.layers["1"].mlp
    x_TD = torch.randn(20, cfg.hidden_size)
    ids_TK, w_TK = moe.route(x_TD[None], 0.0)
    scores_TE = (x_TD @ moe.gate.weight.T).sigmoid()
    assert torch.equal(ids_TK.sort(-1).values, scores_TE.topk(cfg.num_experts_per_tok).indices.sort(-1).values)
    picked_TK = scores_TE.gather(1, ids_TK)
    torch.testing.assert_close(w_TK, cfg.routed_scaling_factor * picked_TK / picked_TK.sum(-1, keepdim=True))


def test_meta_build_then_reset_equals_direct_build():
    """The pipeline's path (build on meta, drop other stages' layers, to_empty, reset_parameters) gives the weights
    of a direct build: each tensor's init is seeded by its name, not by what else was initialised before it."""
    torch.manual_seed(3)
    direct = DeepseekV2ForCausalLM(CFG)
    torch.manual_seed(3)
    with torch.device("meta"):
        lazy = DeepseekV2ForCausalLM(CFG)
    lazy.model.layers = torch.nn.ModuleDict({k: v for k, v in lazy.model.layers.items() if k != "0"})
    lazy.to_empty(device="cpu")
    lazy.reset_parameters()
    want = direct.state_dict()
    for name, t in lazy.state_dict().items():
        assert torch.equal(t, want[name]), name
    assert torch.equal(lazy.model.layers["1"].self_attn.kv_a_layernorm.weight, torch.ones(CFG.kv_lora_rank))


def test_lite_example_has_the_published_size():
    cfg = load_pretrain_cfg(REPO / "examples" / "deepseek-v2-lite.toml").model
    with torch.device("meta"):
        model = DeepseekV2ForCausalLM(cfg)
    assert sum(p.numel() for p in model.parameters()) == 15_706_484_224  # "15.7B total" (DeepSeek-V2 paper)
    assert 2.4e9 < flops_per_token(cfg, 0) / 6 < 2.5e9  # "2.4B activated"


def test_tiny_example_learns(tmp_path):
    overrides = [f'run_dir="{tmp_path}"', f'data.path="{TINY_TOKENS}"', "training.max_steps=30", "training.lr=3e-2",
                 "training.min_lr=1e-3", "training.warmup_steps=2", "training.global_batch_size=4",
                 "training.micro_batch_size=4", "data.seq_len=32", "model.hidden_size=32", "model.num_hidden_layers=2",
                 "model.intermediate_size=64", "model.moe_intermediate_size=16", "checkpoint.interval=0"]  # fmt: skip
    records = pretrain_lm.launch(load_pretrain_cfg(REPO / "examples" / "deepseek-v2-tiny.toml", overrides))
    losses = [r["loss"] for r in records]
    assert sum(losses[-5:]) / 5 < losses[0] - 0.7, losses


transformers = pytest.importorskip("transformers", reason="the HF parity tests need `transformers` (test extra)")


@pytest.mark.parametrize("variant", ["lite", "full"])
def test_hf_parity_import_export(tmp_path, variant):
    """lite: direct queries, plain RoPE, greedy routing. full: compressed queries, YaRN, group-limited routing,
    a routed scaling factor, tied embeddings."""
    shape = dict(vocab_size=96, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
                 first_k_dense_replace=1, num_attention_heads=4, kv_lora_rank=16, qk_nope_head_dim=8,
                 qk_rope_head_dim=4, v_head_dim=6, n_routed_experts=8, n_shared_experts=2,
                 num_experts_per_tok=3)  # fmt: skip
    if variant == "lite":
        extra = dict(q_lora_rank=None, topk_method="greedy")
    else:
        yarn = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=16,
                    beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=0.5)  # fmt: skip
        extra = dict(q_lora_rank=12, topk_method="group_limited_greedy", n_group=4, topk_group=2,
                     routed_scaling_factor=2.5, rope_parameters=yarn, max_position_embeddings=64,
                     tie_word_embeddings=True)  # fmt: skip
    hf = transformers.DeepseekV2ForCausalLM(transformers.DeepseekV2Config(**shape, **extra)).eval()
    with torch.no_grad():  # decisive routing: small random router weights would make near-ties
        for layer in hf.model.layers[1:]:
            layer.mlp.gate.weight.normal_(0, 0.5)
    check_hf_round_trip(hf, tmp_path, cfg_from_hf, DeepseekV2ForCausalLM, vocab_size=96)
