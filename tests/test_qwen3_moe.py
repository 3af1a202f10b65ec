"""Qwen3-MoE: grouped experts vs the per-expert loop, the stage split vs reference_forward, aux losses,
and parity with Hugging Face transformers on random weights."""

import pytest
import torch
from hf_parity import check_hf_round_trip

from pithtrain.models.qwen3_moe import (
    Qwen3MoeCfg,
    Qwen3MoeForCausalLM,
    Qwen3MoeSparseMoeBlock,
    cfg_from_hf,
    load_balancing_loss,
)
from pithtrain.operators.token_permute import permute_tokens, unpermute_tokens

CFG = Qwen3MoeCfg(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, num_experts=6, num_experts_per_tok=3,
                  moe_intermediate_size=16, rope_theta=10000.0)  # fmt: skip


def test_grouped_experts_equal_loop():
    experts = Qwen3MoeForCausalLM(CFG).model.layers["0"].mlp.experts
    x_TD = torch.randn(13, CFG.hidden_size)
    topk_ids_TK = torch.randint(0, CFG.num_experts, (13, 2))
    topk_ids_TK[:, 0] = 0  # expert 0 busy, and likely some expert with no tokens at all
    x_ND, perm = permute_tokens(x_TD, topk_ids_TK, CFG.num_experts)
    grouped_TKD = unpermute_tokens(experts(x_ND, perm.tokens_per_expert_E), perm)
    loop_TKD = experts.reference_forward(x_TD, topk_ids_TK)
    torch.testing.assert_close(grouped_TKD, loop_TKD, rtol=1e-5, atol=1e-6)


def test_permutation_round_trip():
    x_TD = torch.randn(7, 4)
    ids = torch.tensor([[2, 0], [1, 2], [0, 1], [2, 1], [0, 2], [1, 0], [2, 0]])
    x_ND, perm = permute_tokens(x_TD, ids, 3)
    assert perm.tokens_per_expert_E.tolist() == [5, 4, 5]
    assert torch.equal(unpermute_tokens(x_ND, perm), x_TD[:, None].expand(7, 2, 4))


def test_load_balancing_loss_values():
    E, K = 4, 2
    uniform = torch.full((2, 4, E), 1 / E)
    balanced = torch.tensor([[0, 1], [2, 3], [0, 1], [2, 3]]).expand(2, 4, K)
    assert load_balancing_loss(uniform, balanced, "global_batch").item() == pytest.approx(1.0)
    # All copies to experts 0 and 1 with their probability 0.5 each: E * (0.5*0.5 + 0.5*0.5) = 2.
    skewed_p = torch.tensor([0.5, 0.5, 0.0, 0.0]).expand(2, 4, E)
    skewed_ids = torch.tensor([0, 1]).expand(2, 4, K)
    assert load_balancing_loss(skewed_p, skewed_ids, "global_batch").item() == pytest.approx(2.0)
    # Per sequence: sequence 0 balanced over {0,1} only, sequence 1 over {2,3}: each scores 2 alone,
    # while pooled over the batch the counts even out to 1.
    p = torch.stack([torch.tensor([0.5, 0.5, 0, 0]).expand(4, E), torch.tensor([0, 0, 0.5, 0.5]).expand(4, E)])
    ids = torch.stack([torch.tensor([0, 1]).expand(4, K), torch.tensor([2, 3]).expand(4, K)])
    assert load_balancing_loss(p, ids, "sequence").item() == pytest.approx(2.0)
    assert load_balancing_loss(p, ids, "global_batch").item() == pytest.approx(1.0)


def test_loss_is_token_weighted_and_ignores_minus_100():
    model = Qwen3MoeForCausalLM(CFG)
    ids = torch.randint(0, CFG.vocab_size, (2, 9))
    labels = ids.clone()
    labels[0, :5] = -100
    logits = model(ids).float()
    expected = torch.nn.functional.cross_entropy(logits[labels != -100], labels[labels != -100], reduction="sum")
    torch.testing.assert_close(model(ids, labels), expected)


transformers = pytest.importorskip("transformers", reason="the HF parity tests need `transformers` (test extra)")


@pytest.mark.parametrize("tie", [False, True])
def test_hf_parity_import_export(tmp_path, tie):
    hf_cfg = transformers.Qwen3MoeConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=6, num_experts_per_tok=3,
        norm_topk_prob=True, tie_word_embeddings=tie, router_aux_loss_coef=0.0,
    )  # fmt: skip
    hf = transformers.Qwen3MoeForCausalLM(hf_cfg).eval()
    with torch.no_grad():  # HF zero-inits the router; random weights exercise the routing
        for layer in hf.model.layers:
            layer.mlp.gate.weight.normal_(0, 0.5)
    check_hf_round_trip(hf, tmp_path, cfg_from_hf, Qwen3MoeForCausalLM, vocab_size=96)


def test_stages_compile_without_graph_breaks():
    """What training.compile compiles traces whole (fullgraph): a graph break would be an error here.
    The `eager` backend runs Dynamo's tracing without generating code, so this stays fast on CPU."""
    from pithtrain.tasks.pretrain_lm import compile_layers

    model = Qwen3MoeForCausalLM(CFG)
    ids = torch.randint(0, CFG.vocab_size, (2, 11))
    eager = model(ids, ids, aux_loss_scale=0.01)
    torch._dynamo.reset()
    compile_layers(model, fullgraph=True, backend="eager")
    compiled = model(ids, ids, aux_loss_scale=0.01)
    compiled.backward()
    torch.testing.assert_close(compiled, eager)


def test_force_balanced_routing_is_round_robin():
    cfg = Qwen3MoeCfg(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=8, num_experts=6, num_experts_per_tok=4,
                      moe_intermediate_size=8, force_balanced_routing=True)  # fmt: skip
    block = Qwen3MoeSparseMoeBlock(cfg)
    torch.nn.init.normal_(block.gate.weight)
    ids_TK, w_TK = block.route(torch.randn(2, 3, 16), aux_loss_scale=0.0)
    assert ids_TK.flatten().tolist() == [i % 6 for i in range(24)]
    assert torch.bincount(ids_TK.flatten(), minlength=6).tolist() == [4] * 6
    assert torch.allclose(w_TK.sum(-1), torch.ones(6))  # the router's probabilities, renormalised
