"""FP8 dense linear (operators/fp8_linear.py) on CPU: the quantised math of forward, dgrad and wgrad, the
FP8 head + loss (operators/cross_entropy.py), the per-step weight cache, and a small Qwen3-MoE trained with
training.precision = "fp8" against fp32. The cuBLAS layouts of the same products are checked on CUDA (the CUDA
cases below, run by benchmarks/gpu_run.sh)."""

import pytest
import torch
import torch.nn.functional as F

from pithtrain.config import ConfigError
from pithtrain.operators import fp8_linear
from pithtrain.operators.cross_entropy import linear_cross_entropy
from pithtrain.operators.fp8 import dequantize_1x128, dequantize_128x128, quantize_1x128, quantize_128x128
from pithtrain.tasks import pretrain_lm
from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def dq1(x):
    return dequantize_1x128(*quantize_1x128(x)).double()


@pytest.mark.parametrize("device", DEVICES)
def test_products_are_the_quantised_operands_multiplied(device):
    torch.manual_seed(0)
    M, K, N = 256, 384, 128
    x = torch.randn(M, K, device=device, dtype=torch.bfloat16).requires_grad_()
    w = (torch.randn(N, K, device=device) * 0.05).requires_grad_()
    dy = torch.randn(M, N, device=device, dtype=torch.bfloat16)
    y = fp8_linear.fp8_linear(x, w)
    y.backward(dy)
    w_q = dequantize_128x128(*quantize_128x128(w.detach())).double()
    # Each product equals its quantised operands multiplied exactly, up to the bf16 rounding of the output.
    torch.testing.assert_close(y.double(), dq1(x.detach()) @ w_q.t(), rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(x.grad.double(), dq1(dy) @ w_q, rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(w.grad.double(), dq1(dy.t()) @ dq1(x.detach().t()).t(), rtol=1e-2, atol=2e-1)
    assert y.dtype == x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32
    # And FP8 stays within a few percent of the unquantised products.
    exact = x.detach().double() @ w.detach().double().t()
    assert (y.double() - exact).norm() / exact.norm() < 0.05


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_head_is_the_quantised_operands_multiplied(device):
    """Logits from 1x128 h and 128x128 W; grad h from the 1x128-quantised logits' gradient; grad W in bf16."""
    torch.manual_seed(0)
    T, D, V = 256, 128, 384
    h = torch.randn(T, D, device=device, dtype=torch.bfloat16).requires_grad_()
    w = torch.randn(V, D, device=device).requires_grad_()  # logits of a few units: quantisation shows in the loss
    labels = torch.randint(0, V, (T,), device=device)
    labels[::7] = -100
    loss = linear_cross_entropy(h, w, labels, chunk_size=128, fp8=True)
    loss.backward()
    logits_ref = (dq1(h.detach()) @ dequantize_128x128(*quantize_128x128(w.detach())).double().t()).requires_grad_()
    loss_ref = F.cross_entropy(logits_ref, labels, ignore_index=-100, reduction="sum")
    loss_ref.backward()
    torch.testing.assert_close(loss.double(), loss_ref.detach(), rtol=5e-4, atol=0)  # unquantised: 1.6e-3 off
    g = logits_ref.grad
    for got, want in [(h.grad, g @ w.detach().double()), (w.grad, g.t() @ h.detach().double())]:
        assert (got.double() - want).norm() / want.norm() < 0.03
    assert h.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32
    exact = F.cross_entropy(h.detach().double() @ w.detach().double().t(), labels, ignore_index=-100, reduction="sum")
    assert abs(loss.item() - exact.item()) / exact.item() < 0.01


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weight_kn", [False, True])
def test_grouped_products_are_the_quantised_operands_multiplied(device, weight_kn):
    """Experts 0..2 get 130, 0 and 126 rows: forward and dgrad in FP8 per expert, wgrad in bf16; weights stored
    [E, N, K] (qwen3_moe, deepseek_v2) or [E, K, N] (weight_kn: gpt_oss)."""
    torch.manual_seed(0)
    E, N, K, counts = 3, 256, 128, [130, 0, 126]
    offs = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)
    x = torch.randn(sum(counts), K, device=device, dtype=torch.bfloat16).requires_grad_()
    w = (torch.randn(E, N, K, device=device) * 0.05).requires_grad_()
    dy = torch.randn(sum(counts), N, device=device, dtype=torch.bfloat16)
    if weight_kn:  # the same weights stored transposed: its gradient comes back in that layout
        w_kn = w.detach().mT.contiguous().requires_grad_()
        y = fp8_linear.fp8_grouped_linear(x, w_kn, offs, weight_kn=True)
        y.backward(dy)
        w.grad = w_kn.grad.mT
    else:
        y = fp8_linear.fp8_grouped_linear(x, w, offs)
        y.backward(dy)
    rows = torch.repeat_interleave(torch.arange(E, device=device), torch.tensor(counts, device=device))
    w_q = torch.stack([dequantize_128x128(*quantize_128x128(w.detach()[e])) for e in range(E)]).double()
    y_ref = torch.einsum("mk,mnk->mn", dq1(x.detach()), w_q[rows])
    dx_ref = torch.einsum("mn,mnk->mk", dq1(dy), w_q[rows])
    dw_ref = torch.stack([dy[rows == e].double().t() @ x.detach()[rows == e].double() for e in range(E)])
    torch.testing.assert_close(y.double(), y_ref, rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(x.grad.double(), dx_ref, rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(w.grad.double(), dw_ref, rtol=1e-2, atol=1e-1)
    assert not w.grad[1].any() and w.grad.dtype == torch.float32


def test_weight_quantised_once_per_step(monkeypatch):
    calls = []
    quantize = fp8_linear.quantize_128x128_transposed
    record = lambda w, group_rows: calls.append(w.shape) or quantize(w, group_rows)  # noqa: E731
    monkeypatch.setattr(fp8_linear, "quantize_128x128_transposed", record)
    w = torch.randn(128, 128, requires_grad=True)
    with fp8_linear.step_weight_cache():
        for _ in range(3):  # three micro-batches
            fp8_linear.fp8_linear(torch.randn(128, 128), w).sum().backward()
    assert len(calls) == 1
    with fp8_linear.step_weight_cache():  # the next step
        fp8_linear.fp8_linear(torch.randn(128, 128), w)
    assert len(calls) == 2


def test_a_caller_outside_the_step_gets_fresh_weights():
    """After an optimizer step changed the weight, a second caller (an evaluation, a profiler) must see the new
    weight quantised, not the step's cached copy."""
    w = torch.randn(128, 128)
    before = fp8_linear.quantized_weight(w)[0].float()  # a first caller
    with torch.no_grad():
        w.mul_(-1)  # the optimizer step
    assert torch.equal(fp8_linear.quantized_weight(w)[0].float(), -before)
    with fp8_linear.step_weight_cache():
        in_step = fp8_linear.quantized_weight(w)[0]
        assert fp8_linear.quantized_weight(w)[0] is in_step  # inside a step: quantised once
    assert fp8_linear.quantized_weight(w)[0] is not in_step


FP8_MODEL = """
[model]
family = "qwen3_moe"
vocab_size = 512
hidden_size = 128
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
head_dim = 64
num_experts = 4
num_experts_per_tok = 2
moe_intermediate_size = 128
"""


def test_fp8_training_tracks_fp32(tmp_path):
    """Same seed and data, 30 steps: FP8 (bf16 around the FP8 matmuls) ends within 2% of fp32."""
    losses = {}
    for precision in ("fp32", "fp8"):
        config = tmp_path / f"{precision}.toml"
        config.write_text(
            f'run_dir = "{tmp_path / precision}"\n{FP8_MODEL}\n[training]\nmax_steps = 30\nglobal_batch_size = 4\n'
            f'micro_batch_size = 2\nlr = 3e-3\nwarmup_steps = 3\ndevice = "cpu"\nprecision = "{precision}"\n'
            '[data]\nkind = "synthetic"\nseq_len = 64\n[checkpoint]\ninterval = 0\n'
        )
        losses[precision] = [r["loss"] for r in pretrain_lm.launch(load_pretrain_cfg(str(config)))]
    ref, fp8 = (sum(losses[p][-5:]) / 5 for p in ("fp32", "fp8"))
    assert losses["fp8"][0] == pytest.approx(losses["fp32"][0], rel=1e-2)
    assert abs(fp8 - ref) / ref < 0.02, losses


def test_fp8_needs_block_multiples(tiny_config):
    with pytest.raises(ConfigError, match="needs model.hidden_size = 32 to be a multiple of 128"):
        pretrain_lm.setup(load_pretrain_cfg(str(tiny_config()), ['training.precision="fp8"']))


def test_fp8_stages_compile_without_graph_breaks(monkeypatch):
    """The FP8 projections are custom ops, so training.compile's stages still trace whole (fullgraph)."""
    from pithtrain.contexts import precision
    from pithtrain.models.qwen3_moe import Qwen3MoeCfg, Qwen3MoeForCausalLM
    from pithtrain.tasks.pretrain_lm import compile_layers

    monkeypatch.setattr(precision, "fp8", True)
    cfg = Qwen3MoeCfg(vocab_size=256, hidden_size=128, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=128, num_experts=2, num_experts_per_tok=1,
                      moe_intermediate_size=128)  # fmt: skip
    model = Qwen3MoeForCausalLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 64))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # precision = "fp8" trains under bf16 autocast
        eager = model(ids, ids)
        torch._dynamo.reset()
        compile_layers(model, fullgraph=True, backend="eager")
        compiled = model(ids, ids)
    compiled.backward()
    torch.testing.assert_close(compiled, eager)
    assert model.model.layers["0"].self_attn.q_proj.weight.grad is not None
