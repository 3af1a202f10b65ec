"""training.precision = "fp8" on deepseek_v2 and gpt_oss (qwen3_moe's cases are in tests/test_fp8_linear.py): which
weights go through FP8 matmuls, one FP8 forward and backward against the fp32 path, a short training that tracks
fp32, and the set-up refusal of a width that 128-wide blocks do not divide. On CPU the FP8 products run as
dequantised fp32 matmuls (operators/fp8_linear.py), the quantisation itself being the real one."""

import pytest
import torch
from conftest import TINY_TOKENS

from pithtrain.config import ConfigError
from pithtrain.contexts import precision
from pithtrain.models.deepseek_v2 import DeepseekV2Cfg, DeepseekV2ForCausalLM
from pithtrain.models.gpt_oss import GptOssCfg, GptOssForCausalLM
from pithtrain.operators import cross_entropy, fp8_linear
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

# Every FP8 width a multiple of 128. DeepSeek: q through q_a/q_b (q_lora_rank), kv_a_proj_with_mqa 128 + 64 wide
# (bf16), the dense layer's MLP 96 wide (bf16: its width is not checked). GPT-OSS: G x Dh = 128, H x Dh = 256.
MODELS = {
    "deepseek_v2": dict(vocab_size=256, hidden_size=128, intermediate_size=96, num_hidden_layers=2,
                        first_k_dense_replace=1, num_attention_heads=2, q_lora_rank=128, kv_lora_rank=128,
                        qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64, n_routed_experts=4,
                        n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=128, rope_factor=1.0),
    "gpt_oss": dict(vocab_size=256, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=64, sliding_window=16, num_local_experts=4, num_experts_per_tok=2,
                    intermediate_size=128, rope_factor=1.0),
}  # fmt: skip
CLASSES = {"deepseek_v2": (DeepseekV2Cfg, DeepseekV2ForCausalLM), "gpt_oss": (GptOssCfg, GptOssForCausalLM)}

# The weights each family's FP8 call sites quantise (suffixes of parameter names); the rest stay bf16.
FP8_WEIGHTS = {
    "deepseek_v2": {"self_attn.q_a_proj.weight", "self_attn.q_b_proj.weight", "self_attn.kv_b_proj.weight",
                    "self_attn.o_proj.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                    "mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight",
                    "mlp.shared_experts.down_proj.weight", "lm_head.weight"},
    "gpt_oss": {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj", "lm_head.weight"},
}  # fmt: skip


def make_model(family):
    cfg_class, model_class = CLASSES[family]
    torch.manual_seed(0)
    model = model_class(cfg_class(**MODELS[family]))
    with torch.no_grad():  # biases start at zero; these are as large as the products, so a lost one shows
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.2)
    return model


def outputs_and_grads(fn, inputs, params, fp8: bool, monkeypatch):
    """fn(*inputs), and the gradients of its square sum w.r.t. the inputs and params: fp8 as training runs it (bf16
    autocast around the FP8 matmuls, operators/fp8_linear.py), else in fp32."""
    monkeypatch.setattr(precision, "fp8", fp8)
    inputs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=fp8):
        out = fn(*inputs)
    leaves = [t for t in inputs if t.requires_grad] + list(params)
    return [out.detach().double(), *(g.double() for g in torch.autograd.grad(out.float().square().sum(), leaves))]


def relative_errors(fn, inputs, params, monkeypatch) -> list[float]:
    fp32 = outputs_and_grads(fn, inputs, params, False, monkeypatch)
    fp8 = outputs_and_grads(fn, inputs, params, True, monkeypatch)
    return [((a - b).norm() / b.norm()).item() for a, b in zip(fp8, fp32)]


@pytest.mark.parametrize("family", ["deepseek_v2", "gpt_oss"])
def test_fp8_call_sites_quantise_the_named_weights(family, monkeypatch):
    model = make_model(family)
    names = {id(p): n for n, p in model.named_parameters()}
    seen = set()
    quantise = fp8_linear.quantized_weight
    record = lambda w: seen.add(names[id(w)]) or quantise(w)  # noqa: E731
    monkeypatch.setattr(fp8_linear, "quantized_weight", record)
    monkeypatch.setattr(cross_entropy, "quantized_weight", record)  # the head's own import
    ids = torch.randint(0, 256, (2, 64))
    outputs_and_grads(lambda: model(ids, ids), [], list(model.parameters()), True, monkeypatch)
    dense = model.cfg.first_k_dense_replace if family == "deepseek_v2" else 0
    want = {n for n in names.values() if any(n.endswith(s) for s in FP8_WEIGHTS[family])}
    assert seen == want
    per_layer = len(FP8_WEIGHTS[family]) - 1  # lm_head once
    assert len(want) == 1 + per_layer * model.cfg.num_hidden_layers - 5 * dense  # dense: no experts, no shared ones


# One FP8 product with both operands quantised to e4m3 (3 mantissa bits: each element off by up to 2^-4 of itself;
# the 1x128 and 128x128 scales only pick the exponent range) is off by 3-5% of its norm (tests/test_fp8_linear.py
# holds it under 5%); a module chains two or three such products (q_a -> q_b, gate/up -> down, forward -> dgrad),
# measured here at 2-7.5%. Bound: 10%. A wrong expert layout, a bias lost or added twice, or a scale from the wrong
# block moves them by tens of percent (tried by breaking the code).
MODULE_TOL = 0.10


@pytest.mark.parametrize("family", ["deepseek_v2", "gpt_oss"])
def test_fp8_modules_track_fp32(family, monkeypatch):
    """Attention, experts (130, 0, 126 and 128 rows), shared experts and head of the MoE layer, each in FP8 against
    fp32: output, input gradient and every parameter's gradient within MODULE_TOL in norm."""
    model = make_model(family)
    layer, x_BSD = model.model.layers["1"], torch.randn(2, 64, 128)
    cos, sin = model.rope(torch.zeros(2, 64, dtype=torch.long))
    counts_E = torch.tensor([130, 0, 126, 128])
    parts = {
        "attention": (layer.self_attn, lambda x: layer.self_attn(x, cos, sin), [x_BSD]),
        "experts": (layer.mlp.experts, layer.mlp.experts, [torch.randn(int(counts_E.sum()), 128), counts_E]),
        "head": (model.lm_head, model.lm_head, [x_BSD.view(-1, 128), torch.randint(0, 256, (128,))]),
    }
    if family == "deepseek_v2":
        parts["shared experts"] = (layer.mlp.shared_experts, layer.mlp.shared_experts, [x_BSD])
    for part, (module, fn, inputs) in parts.items():
        names = ["output", "input"] + [n for n, _ in module.named_parameters()]
        errors = dict(zip(names, relative_errors(fn, inputs, list(module.parameters()), monkeypatch)))
        assert len(errors) == len(names) and max(errors.values()) < MODULE_TOL, (part, errors)


@pytest.mark.parametrize("family", ["deepseek_v2", "gpt_oss"])
def test_fp8_model_loss_and_gradient_track_fp32(family, monkeypatch):
    """The whole model: errors compound over the layers, and a few tokens whose router margin is below FP8's noise
    pick other experts, so single small gradients (the router's, a bias's) can be far off; the loss (a sum over 128
    tokens whose errors mostly cancel) within 1%, and the whole gradient within 15% in norm (measured 8-11%)."""
    model = make_model(family)
    ids, params = torch.randint(0, 256, (2, 64)), list(model.parameters())
    loss32, *grads32 = outputs_and_grads(lambda: model(ids, ids), [], params, False, monkeypatch)
    loss8, *grads8 = outputs_and_grads(lambda: model(ids, ids), [], params, True, monkeypatch)
    assert abs(loss8 - loss32) / loss32 < 0.01, (loss8, loss32)
    error = sum((a - b).square().sum() for a, b in zip(grads8, grads32)) ** 0.5
    assert error / sum(g.square().sum() for g in grads32) ** 0.5 < 0.15


def run_config(tmp_path, family, precision_name, steps):
    """A run on the shipped tiny corpus (token ids below 2048, a multiple of 128), so the loss has something to
    learn: on random tokens it stays at ln(V) whatever the matmuls do."""
    model = "\n".join(f"{k} = {v}" for k, v in (MODELS[family] | {"vocab_size": 2048}).items())
    config = tmp_path / f"{family}-{precision_name}.toml"
    config.write_text(
        f'run_dir = "{tmp_path / family / precision_name}"\n[model]\nfamily = "{family}"\n{model}\n'
        f"[training]\nmax_steps = {steps}\nglobal_batch_size = 4\nmicro_batch_size = 2\nlr = 3e-3\n"
        f'warmup_steps = 3\ndevice = "cpu"\nprecision = "{precision_name}"\n'
        f'[data]\nkind = "tokens"\npath = "{TINY_TOKENS}"\nseq_len = 64\n[checkpoint]\ninterval = 0\n'
    )
    return load_pretrain_cfg(str(config))


@pytest.mark.parametrize("family", ["deepseek_v2", "gpt_oss"])
def test_fp8_training_tracks_fp32(family, tmp_path):
    """Same seed and data, 20 steps: FP8 (bf16 around the FP8 matmuls) ends within 2% of fp32, as qwen3_moe does
    in tests/test_fp8_linear.py, and FP8 has learnt (its last losses 10% under its first; 14% measured)."""
    losses = {p: [r["loss"] for r in pretrain_lm.launch(run_config(tmp_path, family, p, 20))] for p in ("fp32", "fp8")}
    ref, fp8 = (sum(losses[p][-5:]) / 5 for p in ("fp32", "fp8"))
    assert losses["fp8"][0] == pytest.approx(losses["fp32"][0], rel=1e-2)
    assert abs(fp8 - ref) / ref < 0.02, losses
    assert fp8 < 0.9 * losses["fp8"][0], losses


# (family, key, value, the width named in the refusal): H x (Dn + Dv) = 2 x (64 + 32) for v_head_dim = 32.
@pytest.mark.parametrize(
    "family, key, value, width",
    [("deepseek_v2", "kv_lora_rank", 64, "model.kv_lora_rank = 64"),
     ("deepseek_v2", "v_head_dim", 32, "model.num_attention_heads x (qk_nope_head_dim + v_head_dim) = 192"),
     ("gpt_oss", "intermediate_size", 96, "model.intermediate_size = 96"),
     ("gpt_oss", "hidden_size", 2880, "model.hidden_size = 2880")],
)  # fmt: skip
def test_fp8_refuses_widths_off_the_128_grid(family, key, value, width, tmp_path):
    cfg = run_config(tmp_path, family, "fp8", 1)
    setattr(cfg.model, key, value)
    with pytest.raises(ConfigError) as refused:
        pretrain_lm.setup(cfg)
    message = str(refused.value)
    assert f"needs {width} to be a multiple of 128" in message and "\n" not in message, message
    assert 'train with training.precision = "bf16"' in message
    assert not (tmp_path / family).exists()  # refused before anything was written


@pytest.mark.parametrize("family", ["deepseek_v2", "gpt_oss"])
def test_fp8_stages_compile_without_graph_breaks(family, monkeypatch):
    """Stage 1 holds the FP8 projections (and DeepSeek's shared experts, GPT-OSS's bias adds): training.compile
    still traces it whole (fullgraph), as for qwen3_moe in tests/test_fp8_linear.py."""
    monkeypatch.setattr(precision, "fp8", True)
    model, ids = make_model(family), torch.randint(0, 256, (2, 64))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # precision = "fp8" trains under bf16 autocast
        eager = model(ids, ids)
        torch._dynamo.reset()
        pretrain_lm.compile_layers(model, fullgraph=True, backend="eager")
        compiled = model(ids, ids)
    compiled.backward()
    torch.testing.assert_close(compiled, eager)
    assert model.model.layers["1"].self_attn.o_proj.weight.grad is not None
