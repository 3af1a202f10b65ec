"""The block-scaled FP8 grouped matmul (`pithtrain/operators/fp8_gemm.py`): kernel against reference on awkward
groups (empty, 1 row, either side of a 128-row tile, rows past offs[-1]) and widths (K, N off the 128 grid), the
reference against an independent dequantisation, and quantise -> matmul against the unquantised product.

Kernel cases take a `device` and run in a TRITON_INTERPRET=1 child pytest on CPU, as in `tests/test_operators.py`
(whose docstring says why). Inputs get a random power-of-two gain per scale block (2**-2 .. 2**2), so a scale
read from the wrong block moves the output far outside the tolerances below.
"""

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_child import INTERPRETED, parametrize_device, run_under_interpreter

from pithtrain.operators import fp8, fp8_gemm

# |out - ref| <= TOL * (|A| @ |B|): fp32 summation on CPU; on Hopper the FP8 MMA keeps ~14 mantissa bits
# inside each 128-wide K step (DeepSeek-V3, section 3.3.2) before the fp32 promotion.
TOL = {"cpu": 1e-5, "cuda": 2e-3}


def pytest_generate_tests(metafunc):
    parametrize_device(metafunc)


@pytest.mark.skipif(INTERPRETED, reason="this is the interpreter child")
def test_cpu_cases_under_interpreter():
    run_under_interpreter(__file__)


def block_gain(R, C, rows_per_block, gen):
    gain = 2.0 ** torch.randint(-2, 3, (triton.cdiv(R, rows_per_block), triton.cdiv(C, 128)), generator=gen)
    return gain.repeat_interleave(rows_per_block, 0).repeat_interleave(128, 1)[:R, :C]


def make_inputs(sizes, K, N, extra_rows=0, seed=0):
    """(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E) in the caller's layout: weights [E, N, K] seen as [E, K, N]."""
    gen = torch.Generator().manual_seed(seed)
    M = sum(sizes) + extra_rows
    qa_MK, sa_MKb = fp8.quantize_1x128_reference(torch.randn(M, K, generator=gen) * block_gain(M, K, 1, gen))
    weights = [torch.randn(N, K, generator=gen) * block_gain(N, K, 128, gen) for _ in sizes]
    qb_ENK, sb_ENbKb = map(torch.stack, zip(*map(fp8.quantize_128x128_reference, weights)))
    offs_E = torch.tensor(sizes).cumsum(0).to(torch.int32)
    return qa_MK, sa_MKb, qb_ENK.transpose(1, 2), sb_ENbKb.transpose(1, 2), offs_E


def abs_fp8(q):
    return q.float().abs().to(torch.float8_e4m3fn)  # exact: |q| is on the e4m3 grid


def assert_within(out_MN, want_MN, inputs, tol, rtol=0.0):
    """Elementwise |out - want| <= tol * (|A| @ |B|) (the natural scale of a sum's rounding error) + rtol * |want|."""
    qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E = inputs
    bound_MN = fp8_gemm.fp8_grouped_mm_reference(
        abs_fp8(qa_MK), sa_MKb, abs_fp8(qb_EKN), sb_EKbNb, offs_E, torch.float32
    )
    err_MN = (out_MN.double().cpu() - want_MN.double().cpu()).abs()
    excess_MN = err_MN - rtol * want_MN.double().cpu().abs()
    assert (excess_MN <= tol * bound_MN).all(), (
        f"max err / (|A| @ |B|) = {(excess_MN / bound_MN).nan_to_num().max():.3g}"
    )


# (group sizes, K, N, rows past offs[-1], block_m, block_n): empty groups, 1 row, either side of a 128-row tile;
# K and N off and on the 128 grid; BLOCK_N below (64) and above (256) the 128-wide scale block; 70 rows past
# offs[-1] take two 64-row tiles (and the whole grid, cdiv(M, 64) + E).
CASES = [
    ([0, 1, 127, 129, 300, 0], 208, 72, 5, 128, 128),
    ([1, 0, 129, 127], 256, 256, 0, 128, 128),
    ([3, 129], 144, 136, 70, 64, 64),
    ([3, 0, 129], 384, 300, 0, 128, 256),
]


@pytest.mark.parametrize("sizes,K,N,extra_rows,block_m,block_n", CASES)
def test_fp8_grouped_mm_triton(device, sizes, K, N, extra_rows, block_m, block_n, monkeypatch):
    inputs = make_inputs(sizes, K, N, extra_rows)
    want_MN = fp8_gemm.fp8_grouped_mm_reference(*inputs, out_dtype=torch.float32)
    on_device = [t.to(device) for t in inputs]
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))  # catch unwritten rows
    out_MN = fp8_gemm.fp8_grouped_mm_triton(*on_device, torch.float32, block_m=block_m, block_n=block_n)
    monkeypatch.undo()
    assert out_MN.shape == want_MN.shape and out_MN.dtype == torch.float32
    assert_within(out_MN, want_MN, inputs, TOL[device])
    assert not out_MN[sum(sizes) :].any()


def test_fp8_grouped_mm_strides_and_bf16(device, monkeypatch):
    """A contiguous [E, K, N] qb and sb, a strided qa; the dispatcher picks the kernel; bf16 output."""
    qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E = make_inputs([40, 0, 90], 208, 140, extra_rows=3, seed=1)
    inputs = (qa_MK, sa_MKb, qb_EKN.contiguous(), sb_EKbNb.contiguous(), offs_E)
    want_MN = fp8_gemm.fp8_grouped_mm_reference(*inputs, out_dtype=torch.float32)
    monkeypatch.setattr(fp8_gemm, "fp8_grouped_mm_reference", lambda *a, **k: pytest.fail("reference ran, not Triton"))
    qa_strided = torch.cat([qa_MK.float(), qa_MK.float()], dim=1).to(torch.float8_e4m3fn)[:, : qa_MK.shape[1]]
    on_device = [t.to(device) for t in (qa_strided, *inputs[1:])]
    out_MN = fp8_gemm.fp8_grouped_mm(*on_device)
    monkeypatch.undo()  # assert_within uses the reference
    assert out_MN.dtype == torch.bfloat16
    # + the cast to bf16: half an ulp (<= 2**-8) on GPU, a whole one in the interpreter (it truncates)
    assert_within(out_MN, want_MN, inputs, TOL[device], rtol=2**-7)


def test_reference_matches_independent_dequantisation():
    """Scales gathered by index in float64, every expert applied to every row, then each row's group picked."""
    qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E = inputs = make_inputs([0, 1, 127, 129, 30], 200, 72, extra_rows=4)
    (M, K), N = qa_MK.shape, qb_EKN.shape[2]
    kb_K, nb_N = torch.arange(K) // 128, torch.arange(N) // 128
    a_MK = qa_MK.double() * sa_MKb.double()[:, kb_K]
    b_EKN = qb_EKN.double() * sb_EKbNb.double()[:, kb_K][:, :, nb_N]
    group_M = torch.searchsorted(offs_E, torch.arange(M, dtype=torch.int32), right=True)  # E past offs[-1]
    all_EMN = torch.einsum("mk,ekn->emn", a_MK, b_EKN)
    want_MN = torch.cat([all_EMN, all_EMN.new_zeros(1, M, N)])[group_M, torch.arange(M)]
    out_MN = fp8_gemm.fp8_grouped_mm_reference(*inputs, out_dtype=torch.float32)
    assert_within(out_MN, want_MN, inputs, 1e-5)
    assert not out_MN[-4:].any()


def test_quantised_product_close_to_exact():
    """quantise (1x128, 128x128) -> fp8_grouped_mm vs the fp32 product of the bf16 inputs, through the dispatchers:
    the reference here, the kernel in the interpreter child and on GPU. e4m3 keeps 3 mantissa bits, so each operand
    is off by ~2.5% rms and the product by ~3.5%."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(2)
    sizes, K, N = [5, 0, 140], 304, 136
    x_MK = torch.randn(sum(sizes) + 3, K, generator=gen).bfloat16().to(device)
    w_ENK = torch.randn(len(sizes), N, K, generator=gen).bfloat16().to(device)
    offs_E = torch.tensor(sizes, device=device).cumsum(0).to(torch.int32)
    qb_ENK, sb_ENbKb = map(torch.stack, zip(*map(fp8.quantize_128x128, w_ENK)))
    out_MN = fp8_gemm.fp8_grouped_mm(*fp8.quantize_1x128(x_MK), qb_ENK.mT, sb_ENbKb.mT, offs_E)
    assert out_MN.dtype == torch.bfloat16 and not out_MN[sum(sizes) :].any()
    start = 0
    for e, end in enumerate(offs_E.tolist()):
        exact = x_MK[start:end].float() @ w_ENK[e].float().T
        rel = (out_MN[start:end].float() - exact).norm() / exact.norm().clamp(min=1e-30)
        assert rel < 0.05, f"group {e}: relative error {rel:.3f}"
        start = end


@pytest.mark.skipif(INTERPRETED, reason="kernels are interpreted in this process")
def test_kernel_compiles_for_h200():
    """Frontend and ptxas for sm_90 with the launch's alignment and stride-1 specialisations: A and B tiles copied
    by TMA, FP8 wgmma, and the K loop software-pipelined (a shared-memory buffer per stage)."""
    bm, bn = fp8_gemm.BLOCK_M, fp8_gemm.BLOCK_N
    args = dict(a_desc=f"tensordesc<fp8e4nv[{bm}, 128]>", b_desc=f"tensordesc<fp8e4nv[{bn}, 128]>")
    args |= dict(sa_ptr="*fp32", sb_ptr="*fp32", offs_ptr="*i32", out_ptr="*bf16")
    aligned = ["sa_ptr", "sb_ptr", "offs_ptr", "out_ptr", "N", "stride_sam", "stride_sbe", "stride_om"]
    constexprs = dict(stride_sbk=1, K=2048, BLOCK_K=128, BLOCK_E=128, BLOCK_M=bm, BLOCK_N=bn)
    kernel = fp8_gemm._fp8_grouped_mm_kernel
    signature = {name: args.get(name, "constexpr" if name in constexprs else "i32") for name in kernel.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(kernel.arg_names) if name in aligned}
    options = dict(num_warps=fp8_gemm.NUM_WARPS, num_stages=fp8_gemm.NUM_STAGES, enable_fp_fusion=True)
    compiled = triton.compile(
        ASTSource(kernel, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32), options=options
    )
    ttgir = compiled.asm["ttgir"]
    assert compiled.asm["cubin"] and "warp_group_dot" in ttgir and "async_tma_copy_global_to_local" in ttgir
    stage_bytes = (bm + bn) * 128  # one FP8 A tile and one B tile
    assert compiled.metadata.shared >= (fp8_gemm.NUM_STAGES - 1) * stage_bytes, compiled.metadata.shared
