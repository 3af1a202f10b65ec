"""GPT-OSS: sink + sliding-window attention against SDPA and transformers, the stage split vs reference_forward,
the example configs, a tiny model that learns, MXFP4 refusal, and parity with Hugging Face transformers both ways."""

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, TINY_TOKENS
from hf_parity import check_hf_round_trip
from safetensors.torch import save_file

from pithtrain.config import ConfigError
from pithtrain.models.gpt_oss import (
    GptOssCfg,
    GptOssForCausalLM,
    cfg_from_hf,
    flops_per_token,
    sink_attention,
    sink_attention_reference,
)
from pithtrain.tasks import convert_checkpoint, pretrain_lm
from pithtrain.tasks.convert_checkpoint import ConvertCheckpointCfg
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

CFG = GptOssCfg(vocab_size=96, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                head_dim=8, sliding_window=4, num_local_experts=6, num_experts_per_tok=2, intermediate_size=16,
                swiglu_limit=0.05, rope_factor=4.0, rope_original_max_position_embeddings=16,
                max_position_embeddings=64)  # fmt: skip


@pytest.mark.parametrize("window", [None, 3])
def test_sink_attention_equals_its_oracle_and_sdpa(window):
    q, k, v = torch.randn(3, 2, 4, 9, 8).unbind(0)
    sinks = torch.randn(4, requires_grad=True)
    fused = sink_attention(q, k, v, sinks, window, 8**-0.5)
    oracle = sink_attention_reference(q, k, v, sinks, window, 8**-0.5)
    torch.testing.assert_close(fused, oracle)
    (g_fused,) = torch.autograd.grad(fused.square().sum(), sinks)
    (g_oracle,) = torch.autograd.grad(oracle.square().sum(), sinks)
    torch.testing.assert_close(g_fused, g_oracle)
    # Against plain SDPA: a very negative sink changes nothing; a sink s scales each output by Z / (Z + e^s),
    # Z the query's softmax denominator.
    i, j = torch.arange(9)[:, None], torch.arange(9)[None]
    allowed = (j <= i) & (j > i - (window or 9))
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(sink_attention(q, k, v, torch.full((4,), -1e4), window, 8**-0.5), plain)
    z_BHS1 = ((q @ k.transpose(-2, -1)) * 8**-0.5).masked_fill(~allowed, float("-inf")).exp().sum(-1, True)
    torch.testing.assert_close(fused, plain * z_BHS1 / (z_BHS1 + sinks.exp()[:, None, None]))


def test_meta_build_then_reset_equals_direct_build():
    """The pipeline's path (build on meta, drop other stages' layers, to_empty, reset_parameters) gives the weights
    of a direct build: each tensor's init is seeded by its name, not by what else was initialised before it."""
    torch.manual_seed(3)
    direct = GptOssForCausalLM(CFG)
    torch.manual_seed(3)
    with torch.device("meta"):
        lazy = GptOssForCausalLM(CFG)
    lazy.model.layers = torch.nn.ModuleDict({k: v for k, v in lazy.model.layers.items() if k != "0"})
    lazy.to_empty(device="cpu")
    lazy.reset_parameters()
    want = direct.state_dict()
    for name, t in lazy.state_dict().items():
        assert torch.equal(t, want[name]), name
    attn, experts = lazy.model.layers["2"].self_attn, lazy.model.layers["2"].mlp.experts
    assert not attn.q_proj.bias.any() and not experts.down_proj_bias.any() and attn.sinks.std() > 0


@pytest.mark.parametrize("name, total, active", [("20b", 20_914_757_184, 3.61e9), ("120b", 116_829_156_672, 5.13e9)])
def test_examples_have_the_published_size(name, total, active):
    cfg = load_pretrain_cfg(REPO / "examples" / f"gpt-oss-{name}.toml").model
    with torch.device("meta"):
        model = GptOssForCausalLM(cfg)
    assert sum(p.numel() for p in model.parameters()) == total  # 20.91B / 116.83B on the model card
    assert flops_per_token(cfg, 0) / 6 == pytest.approx(active, rel=1e-3)  # active parameters, the head included


def test_tiny_example_learns(tmp_path):
    overrides = [f'run_dir="{tmp_path}"', f'data.path="{TINY_TOKENS}"', "training.max_steps=30", "training.lr=3e-2",
                 "training.min_lr=1e-3", "training.warmup_steps=2", "training.global_batch_size=4",
                 "training.micro_batch_size=4", "data.seq_len=32", "model.hidden_size=32", "model.head_dim=8",
                 "model.sliding_window=8", "model.intermediate_size=16", "model.num_hidden_layers=2",
                 "checkpoint.interval=0"]  # fmt: skip
    records = pretrain_lm.launch(load_pretrain_cfg(REPO / "examples" / "gpt-oss-tiny.toml", overrides))
    losses = [r["loss"] for r in records]
    assert sum(losses[-5:]) / 5 < losses[0] - 0.7, losses


def test_mxfp4_checkpoints_are_refused_with_the_way_out(tmp_path):
    hf_config = {"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}}
    with pytest.raises(ConfigError, match="MXFP4 import is not supported.*Mxfp4Config\\(dequantize=True\\)"):
        cfg_from_hf(hf_config)
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    save_file({"model.layers.0.mlp.experts.gate_up_proj_blocks": torch.zeros(2, 2, dtype=torch.uint8)},
              tmp_path / "model.safetensors")  # fmt: skip
    with pytest.raises(ConfigError, match="MXFP4 import is not supported"):
        convert_checkpoint.launch(ConvertCheckpointCfg("hf-to-pithtrain", str(tmp_path), str(tmp_path / "out")))


transformers = pytest.importorskip("transformers", reason="the HF parity tests need `transformers` (test extra)")


@pytest.mark.parametrize("tie", [False, True])
def test_hf_parity_import_export(tmp_path, tie):
    yarn = dict(rope_type="yarn", rope_theta=150000.0, factor=4.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
                original_max_position_embeddings=16)  # fmt: skip
    hf_cfg = transformers.GptOssConfig(
        vocab_size=96, hidden_size=32, intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_local_experts=6, num_experts_per_tok=2, sliding_window=4,
        swiglu_limit=0.05, rope_parameters=yarn, max_position_embeddings=64, tie_word_embeddings=tie,
    )  # fmt: skip
    hf = transformers.GptOssForCausalLM(hf_cfg).eval()
    with torch.no_grad():  # decisive routing, and non-zero biases and sinks, so each of them is exercised
        for layer in hf.model.layers:
            layer.mlp.router.weight.normal_(0, 0.5)
            for p in [layer.mlp.router.bias, layer.mlp.experts.gate_up_proj_bias, layer.mlp.experts.down_proj_bias]:
                p.normal_(0, 0.1)
            for proj in [
                layer.self_attn.q_proj,
                layer.self_attn.k_proj,
                layer.self_attn.v_proj,
                layer.self_attn.o_proj,
            ]:
                proj.bias.normal_(0, 0.1)
            layer.self_attn.sinks.normal_(0, 1.0)
    check_hf_round_trip(hf, tmp_path, cfg_from_hf, GptOssForCausalLM, vocab_size=96)
