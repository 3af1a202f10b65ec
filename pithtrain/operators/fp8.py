"""Block-wise FP8 (float8_e4m3fn) quantisation with 128-element blocks (DeepSeek-V3, section 3.3.2).

Activations and gradients (x_MK) get one scale per row per 128 columns (1x128 tiles); weights (w_NK)
one scale per 128x128 tile. scale = amax / 448 (448 = float8_e4m3fn's largest value), amax floored
at 1e-12 so an all-zero block gets a finite scale and quantises to zeros; q = x / scale, rounded to
nearest even. Scales are fp32, row-major: [M, ceil(K/128)] and [ceil(N/128), ceil(K/128)]. A last
partial block (K or N not a multiple of 128) is padded with zeros logically: masked loads, so its
amax covers only the real elements. x[m, k] ~= q[m, k] * scale[m, k // 128] (`dequantize_*`).

Eager quantisation pads, takes |x|, reduces amax, broadcasts the scale, divides, clamps and casts:
six passes over the tensor and fp32 temporaries of its full size. Each kernel here reads x once
and writes q (1 byte per element) and the scales, from one tile held in registers.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from pithtrain.operators import backend

FP8_MAX = 448.0
AMAX_FLOOR = 1e-12
BLOCK = 128


def _quantize_tiles_reference(x_MK: torch.Tensor, tile_rows: int):
    """Reference for both layouts: tiles of tile_rows x 128, padded with zeros to whole tiles."""
    M, K = x_MK.shape
    Mb, Kb = triton.cdiv(M, tile_rows), triton.cdiv(K, BLOCK)
    x = F.pad(x_MK.float(), (0, Kb * BLOCK - K, 0, Mb * tile_rows - M)).view(Mb, tile_rows, Kb, BLOCK)
    # Divide by a tensor, not a Python number: CUDA turns division by a scalar into multiplication by its
    # reciprocal, which is not correctly rounded (the kernel's div_rn is).
    scale = x.abs().amax(dim=(1, 3), keepdim=True).clamp(min=AMAX_FLOOR) / torch.tensor(FP8_MAX, device=x.device)
    q = (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    q_MK = q.view(Mb * tile_rows, Kb * BLOCK)[:M, :K].contiguous()
    return q_MK, scale.view(Mb, Kb)


def quantize_1x128_reference(x_MK: torch.Tensor):
    return _quantize_tiles_reference(x_MK, 1)


def quantize_128x128_reference(w_NK: torch.Tensor):
    return _quantize_tiles_reference(w_NK, BLOCK)


def dequantize_1x128(q_MK: torch.Tensor, scale_MKb: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    K = q_MK.shape[1]
    return (q_MK.float() * scale_MKb.repeat_interleave(BLOCK, dim=1)[:, :K]).to(dtype)


def dequantize_128x128(q_NK: torch.Tensor, scale_NbKb: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    N, K = q_NK.shape
    scale_NK = scale_NbKb.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:N, :K]
    return (q_NK.float() * scale_NK).to(dtype)


@triton.jit
def _round_to_e4m3(v):
    """Round fp32 v (|v| <= 448) to the nearest float8_e4m3fn value, ties to even, staying in fp32.
    The Triton interpreter's float -> fp8 cast rounds ties up and drops the carry into the exponent
    (127.7 -> 64); once v is on the e4m3 grid the cast is exact everywhere (on GPU, a no-op change)."""
    a = tl.abs(v)
    exponent = tl.maximum(((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)  # e4m3 subnormals: 2**-6 binade
    ulp = ((exponent - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 2**(exponent - 3): 3 mantissa bits
    inv_ulp = ((3 - exponent + 127) << 23).to(tl.float32, bitcast=True)
    # a * inv_ulp < 16 is exact; adding 1.5 * 2**23 rounds it to an integer, ties to even.
    r = ((a * inv_ulp + 12582912.0) - 12582912.0) * ulp
    return tl.where(v < 0, -r, r)


@triton.jit
def _quantize_tile(x, scale, FP8_MAX: tl.constexpr):
    q = tl.minimum(tl.maximum(tl.math.div_rn(x, scale), -FP8_MAX), FP8_MAX)
    return _round_to_e4m3(q).to(tl.float8e4nv)


@triton.jit
def _quantize_1x128_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    M,
    K,
    stride_m,
    stride_k,
    BLOCK_M: tl.constexpr,
    SCALES_COL_MAJOR: tl.constexpr,
    FP8_MAX: tl.constexpr,
    AMAX_FLOOR: tl.constexpr,
):
    """Program (i, j): rows [i*BLOCK_M, (i+1)*BLOCK_M), columns [j*128, (j+1)*128); one scale per row. The
    scales go row-major [M, Kb], or column-major (SCALES_COL_MAJOR: what cuBLAS's block-scaled matmul reads)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * 128 + tl.arange(0, 128)
    mask = (rows < M)[:, None] & (cols < K)[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :] * stride_k, mask=mask, other=0.0).to(tl.float32)
    scale = tl.math.div_rn(tl.maximum(tl.max(tl.abs(x), axis=1), AMAX_FLOOR), FP8_MAX)
    tl.store(q_ptr + rows[:, None] * K + cols[None, :], _quantize_tile(x, scale[:, None], FP8_MAX), mask=mask)
    if SCALES_COL_MAJOR:
        tl.store(scale_ptr + tl.program_id(1) * M + rows, scale, mask=rows < M)
    else:
        tl.store(scale_ptr + rows * tl.num_programs(1) + tl.program_id(1), scale, mask=rows < M)


@triton.jit
def _quantize_128x128_kernel(
    w_ptr,
    q_ptr,
    qt_ptr,
    scale_ptr,
    N,
    K,
    stride_n,
    stride_k,
    group_rows,
    TRANSPOSE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    AMAX_FLOOR: tl.constexpr,
):
    """Program (i, j): the 128x128 tile at rows i*128, columns j*128; one scale for the tile. With TRANSPOSE,
    the tile also goes to qt, each group of group_rows rows transposed ([G, K, group_rows])."""
    rows = tl.program_id(0).to(tl.int64) * 128 + tl.arange(0, 128)
    cols = tl.program_id(1).to(tl.int64) * 128 + tl.arange(0, 128)
    mask = (rows < N)[:, None] & (cols < K)[None, :]
    w = tl.load(w_ptr + rows[:, None] * stride_n + cols[None, :] * stride_k, mask=mask, other=0.0).to(tl.float32)
    scale = tl.math.div_rn(tl.maximum(tl.max(tl.max(tl.abs(w), axis=1), axis=0), AMAX_FLOOR), FP8_MAX)
    q = _quantize_tile(w, scale, FP8_MAX)
    tl.store(q_ptr + rows[:, None] * K + cols[None, :], q, mask=mask)
    if TRANSPOSE:
        group, row_in_group = rows // group_rows, rows % group_rows
        qt_ptrs = qt_ptr + group[:, None] * K * group_rows + cols[None, :] * group_rows + row_in_group[:, None]
        tl.store(qt_ptrs, q, mask=mask)
    tl.store(scale_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1), scale)


def quantize_1x128_triton(x_MK: torch.Tensor, block_m: int = 16, scales_col_major: bool = False, num_warps: int = 4):
    """x_MK may be strided (x.t() quantises 128x1 along M without a copy); q is contiguous. block_m and
    num_warps: the tile's rows and warps (benchmarks/kernel_probe.py sweeps them)."""
    M, K = x_MK.shape
    Kb = triton.cdiv(K, BLOCK)
    q_MK = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=x_MK.device)
    shape = (Kb, M) if scales_col_major else (M, Kb)
    scale = torch.empty(shape, dtype=torch.float32, device=x_MK.device)
    if x_MK.numel():
        grid = (triton.cdiv(M, block_m), Kb)
        _quantize_1x128_kernel[grid](
            x_MK, q_MK, scale, M, K, *x_MK.stride(), BLOCK_M=block_m, SCALES_COL_MAJOR=scales_col_major,
            FP8_MAX=FP8_MAX, AMAX_FLOOR=AMAX_FLOOR, num_warps=num_warps,
        )  # fmt: skip
    return q_MK, scale.t() if scales_col_major else scale


def quantize_128x128_triton(w_NK: torch.Tensor, group_rows: int | None = None):
    N, K = w_NK.shape
    q_NK = torch.empty(N, K, dtype=torch.float8_e4m3fn, device=w_NK.device)
    qt = torch.empty(N // group_rows, K, group_rows, dtype=q_NK.dtype, device=q_NK.device) if group_rows else q_NK
    scale = torch.empty(triton.cdiv(N, BLOCK), triton.cdiv(K, BLOCK), dtype=torch.float32, device=w_NK.device)
    if w_NK.numel():
        _quantize_128x128_kernel[tuple(scale.shape)](
            w_NK, q_NK, qt, scale, N, K, w_NK.stride(0), w_NK.stride(1), group_rows or N,
            TRANSPOSE=bool(group_rows), FP8_MAX=FP8_MAX, AMAX_FLOOR=AMAX_FLOOR, num_warps=8,
        )  # fmt: skip
    return (q_NK, scale, qt) if group_rows else (q_NK, scale)


def quantize_1x128(x_MK: torch.Tensor, scales_col_major: bool = False):
    """(q_MK float8_e4m3fn, scale_MKb fp32): one scale per row per 128 columns; scale_MKb column-major (the
    transpose of a contiguous [Kb, M]) with scales_col_major, as cuBLAS reads it."""
    if backend.use_triton(x_MK):
        return quantize_1x128_triton(x_MK, scales_col_major=scales_col_major)
    q_MK, scale = quantize_1x128_reference(x_MK)
    return q_MK, scale.t().contiguous().t() if scales_col_major else scale


def quantize_128x128(w_NK: torch.Tensor):
    """(q_NK float8_e4m3fn, scale_NbKb fp32): one scale per 128x128 tile."""
    if backend.use_triton(w_NK):
        return quantize_128x128_triton(w_NK)
    else:
        return quantize_128x128_reference(w_NK)


def quantize_128x128_transposed(w_NK: torch.Tensor, group_rows: int):
    """(q_NK, scale_NbKb, qt_GKR): quantize_128x128 and, in the same pass, each group of group_rows rows
    (a multiple of 128; an expert's weight in a stack) transposed: qt[g] = q[g*R : (g+1)*R].T, contiguous.
    Backward matmuls read the transposes; a separate strided fp8 copy cost more than the quantisation."""
    assert group_rows % BLOCK == 0 and w_NK.shape[0] % group_rows == 0, (w_NK.shape, group_rows)
    if backend.use_triton(w_NK):
        return quantize_128x128_triton(w_NK, group_rows)
    q_NK, scale = quantize_128x128_reference(w_NK)
    return q_NK, scale, q_NK.view(-1, group_rows, q_NK.shape[1]).mT.contiguous()
