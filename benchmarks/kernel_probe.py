"""Rates of the matmuls one training step of the local benchmark configs is made of, on this GPU and torch.

    python3 benchmarks/kernel_probe.py [--out DIR]

For each product: the shape, TFLOP/s (median of 20 timed runs after 5 warm-ups, CUDA events) or the error
the installed torch gives. Covers bf16 dense (the 8192^3 peak, the Qwen3 head's three products), bf16
grouped (`torch._grouped_mm` at the 128-expert shapes), and FP8: tensor-wise `torch._scaled_mm` (the FP8
peak) and the 1x128 x 128x128 block-scaled product through `torch.nn.functional.scaled_mm`, checked against
the dequantised product. What it finds decides which FP8 paths pithtrain can take on this torch.
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pithtrain.operators.fp8 import (  # noqa: E402
    dequantize_1x128,
    dequantize_128x128,
    quantize_1x128,
    quantize_1x128_triton,
    quantize_128x128,
    quantize_128x128_transposed,
)
from pithtrain.operators.fp8_gemm import fp8_grouped_mm_triton  # noqa: E402


def timed(fn, flops: float) -> str:
    try:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        t = statistics.median(times)
        return f"{flops / t / 1e12:7.1f} TFLOP/s  ({t * 1e3:.3f} ms)"
    except Exception as e:  # a probe: the error is the finding
        return f"unsupported: {type(e).__name__}: {str(e).splitlines()[0][:150]}"


def col_major(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous().t()


DEV, BF16, F8 = "cuda", torch.bfloat16, torch.float8_e4m3fn


def probe_dense(add) -> None:
    a = torch.randn(8192, 8192, device=DEV, dtype=BF16)
    add("bf16 mm 8192^3", timed(lambda: a @ a, 2 * 8192**3))
    T, D, V = 4096, 2048, 151936
    h, W, g = (torch.randn(*s, device=DEV, dtype=BF16) for s in [(T, D), (V, D), (T, V)])
    acc = torch.zeros(V, D, device=DEV)
    flops = 2 * T * D * V
    add("head fwd  [4096,2048] x [151936,2048]^T", timed(lambda: h @ W.t(), flops))
    add("head dgrad [4096,151936] x [151936,2048]", timed(lambda: g @ W, flops))
    add("head wgrad [151936,4096] x [4096,2048] bf16 out", timed(lambda: g.t() @ h, flops))
    add("head wgrad, fp32 out (mm out_dtype)", timed(lambda: torch.mm(g.t(), h, out_dtype=torch.float32), flops))
    add(
        "head wgrad, fp32 accumulate (addmm)", timed(lambda: torch.addmm(acc, g.t(), h, out_dtype=torch.float32), flops)
    )


def probe_grouped(add) -> None:
    N, E, D, I = 16384 * 8, 128, 2048, 768  # routed copies of 4 x 4096 tokens, top-8 of 128 experts
    offs = torch.arange(1, E + 1, device=DEV, dtype=torch.int32) * (N // E)
    x, w1, w2 = (torch.randn(*s, device=DEV, dtype=BF16) for s in [(N, D), (E, 2 * I, D), (E, D, I)])
    hI, dy = torch.randn(N, I, device=DEV, dtype=BF16), torch.randn(N, 2 * I, device=DEV, dtype=BF16)
    gm, f_up, f_down = torch._grouped_mm, 2 * N * D * 2 * I, 2 * N * D * I
    add(
        "grouped fwd gate_up [131072,2048] x [128,1536,2048]^T",
        timed(lambda: gm(x, w1.transpose(1, 2), offs=offs), f_up),
    )
    add(
        "grouped fwd down [131072,768] x [128,2048,768]^T", timed(lambda: gm(hI, w2.transpose(1, 2), offs=offs), f_down)
    )
    add("grouped dgrad gate_up [131072,1536] x [128,1536,2048]", timed(lambda: gm(dy, w1, offs=offs), f_up))
    add("grouped wgrad gate_up [1536,131072] x [131072,2048]", timed(lambda: gm(dy.t(), x, offs=offs), f_up))
    (qx, sx), (qh, sh) = quantize_1x128(x), quantize_1x128(hI)
    (q1, s1), (q2, s2) = (quantize_128x128(w.reshape(-1, w.shape[-1])) for w in (w1, w2))
    q1, s1, q2, s2 = q1.view(w1.shape), s1.view(E, -1, s1.shape[-1]), q2.view(w2.shape), s2.view(E, -1, s2.shape[-1])
    add("quantize_1x128 [131072,2048] bf16 (bytes: TFLOP/s = TB/s)", timed(lambda: quantize_1x128(x), N * D * 3))
    # The Triton kernel's tile shapes and pipelining at the four products training runs, B in its layouts there
    # (contraction dimension contiguous: dgrad reads the cached transposed weights).
    qdy, sdy = quantize_1x128(dy)
    products = {
        "fwd gate_up": (qx, sx, q1.mT, s1.mT, f_up),
        "fwd down": (qh, sh, q2.mT, s2.mT, f_down),
        "dgrad gate_up": (qdy, sdy, q1.mT.contiguous().mT, s1, f_up),  # [N, 2I] x [E, 2I, D]: K = 2I
        "dgrad down": (qx, sx, q2.mT.contiguous().mT, s2, f_down),  # [N, D] x [E, D, I]: K = D
    }
    configs = [(64, 128, 4, 4), (64, 128, 4, 3), (128, 128, 8, 3), (128, 128, 8, 4), (64, 256, 4, 3)]
    configs += [(128, 256, 8, 3)]
    for name, (qa, sa, qb, sb, flops) in products.items():
        for cfg in configs:
            args = (qa, sa, qb, sb, offs, BF16, *cfg)
            add(f"fp8 grouped (Triton) {name} bm{cfg[0]} bn{cfg[1]} w{cfg[2]} s{cfg[3]}",
                timed(lambda args=args: fp8_grouped_mm_triton(*args), flops))  # fmt: skip
    # torch's own grouped FP8 matmul with the block scaling (if this torch has it for this GPU).
    sgm, st = getattr(torch.nn.functional, "scaled_grouped_mm", None), getattr(torch.nn.functional, "ScalingType", None)
    if sgm is None or st is None:
        add("F.scaled_grouped_mm 1x128 x 128x128", "unsupported: not in this torch")
    else:
        args = (qx, q1.mT, col_major(sx), st.BlockWise1x128, s1.mT, st.BlockWise128x128)
        add("F.scaled_grouped_mm 1x128 x 128x128 fwd gate_up", timed(lambda: sgm(*args, offs=offs), f_up))


def probe_fp8(add) -> None:
    qa, one = torch.randn(8192, 8192, device=DEV).to(F8), torch.ones((), device=DEV)
    add(
        "fp8 tensor-wise _scaled_mm 8192^3",
        timed(lambda: torch._scaled_mm(qa, qa.t(), one, one, out_dtype=BF16), 2 * 8192**3),
    )
    sm = getattr(torch.nn.functional, "scaled_mm", None)
    st = getattr(torch.nn.functional, "ScalingType", None)
    shapes = {
        "q_proj": (16384, 2048, 4096),
        "head": (4096, 2048, 151936),
        "head dgrad": (4096, 151936, 2048),
        "square": (8192, 8192, 8192),
    }
    for name, (M, K, N) in shapes.items():
        label = f"fp8 1x128 x 128x128 {name} [{M},{K}] x [{N},{K}]^T"
        if sm is None or st is None:
            add(label, "unsupported: no torch.nn.functional.scaled_mm in this torch")
            continue
        xa, wb = torch.randn(M, K, device=DEV, dtype=BF16), torch.randn(N, K, device=DEV, dtype=BF16) * 0.02
        (qx, sx), (qw, sw) = quantize_1x128(xa), quantize_128x128(wb)
        # Layouts torch checks: scale_a [M, K/128] column-major; scale_b [round_up(K/128, 4), N/128] column-major.
        sw_pad = torch.zeros(sw.shape[0], (sw.shape[1] + 3) // 4 * 4, device=DEV)
        sw_pad[:, : sw.shape[1]] = sw
        args = (qx, qw.t(), col_major(sx), st.BlockWise1x128, sw_pad.t(), st.BlockWise128x128)
        result = timed(lambda args=args: sm(*args, output_dtype=BF16), 2 * M * K * N)
        if not result.startswith("unsupported"):
            ref = dequantize_1x128(qx, sx) @ dequantize_128x128(qw, sw).t()
            err = (sm(*args, output_dtype=BF16).float() - ref).norm() / ref.norm()
            result += f"  rel. err vs dequantised {err:.1e}"
        add(label, result)


def probe_quantize(add) -> None:
    """The quantisers at the step's operands, as bytes moved per second (TFLOP/s column = TB/s): 1x128 over the
    tile shapes (block_m rows x 128, num_warps), on contiguous and transposed (x.t(), wgrad's) inputs; the
    128x128 quantiser with the transposes it writes for the backward."""
    operands = {
        "experts x [131072,2048]": torch.randn(131072, 2048, device=DEV, dtype=BF16),
        "head grad logits [8192,151936]": torch.randn(8192, 151936, device=DEV, dtype=BF16),
        "qkv dy^T [16384,5120].t()": torch.randn(16384, 5120, device=DEV, dtype=BF16).t(),
        "o x^T [16384,4096].t()": torch.randn(16384, 4096, device=DEV, dtype=BF16).t(),
    }
    for name, x in operands.items():
        for block_m, num_warps in [(16, 4), (32, 4), (32, 8), (64, 4), (64, 8), (128, 8)]:
            add(f"quantize_1x128 {name} bm{block_m} w{num_warps}", timed(
                lambda x=x, b=block_m, w=num_warps: quantize_1x128_triton(x, b, True, w), 3 * x.numel()))  # fmt: skip
    del operands, x  # frees the operands (the head's logits alone are 2.5 GB) before the weights below
    for name, shape, group_rows, dtype in [
        ("experts gate_up [128,1536,2048] fp32", (128 * 1536, 2048), 1536, torch.float32),
        ("experts down [128,2048,768] fp32", (128 * 2048, 768), 2048, torch.float32),
        ("head [151936,2048] bf16", (151936, 2048), 151936, BF16),
    ]:
        w = torch.randn(*shape, device=DEV, dtype=dtype)
        moved = w.numel() * (w.element_size() + 2)  # read w, write q and its transpose
        quantize = lambda w=w, g=group_rows: quantize_128x128_transposed(w, g)  # noqa: E731
        add(f"quantize_128x128_transposed {name}", timed(quantize, moved))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}"]

    def add(name, result):
        rows.append(f"{name:<58} {result}")
        print(rows[-1], flush=True)

    for probe in (probe_quantize, probe_dense, probe_grouped, probe_fp8):
        probe(add)
        torch.cuda.empty_cache()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "kernel_probe.txt").write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
