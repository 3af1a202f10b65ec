"""Block-scaled FP8 grouped matmul for the MoE experts (DeepSeek-V3, section 3.3.2): out = A_e @ B_e per group.

Shapes: M routed rows sorted by expert, K reduction (hidden or FFN width), N output width, E experts on this rank;
Kb = ceil(K/128), Nb = ceil(N/128). `offs_E[e]` is one past group e's last row (`torch._grouped_mm`'s `offs`):
group e owns rows offs[e-1] .. offs[e]-1 (from 0 for e = 0) and may be empty; rows offs[E-1] .. M-1 come out zero.
Scales follow `fp8.py`: sa_MKb one per row per 128 columns of K (1x128), sb_EKbNb one per 128x128 tile of
B_e; out[m, n] = sum_k qa[m, k] sa[m, k//128] qb[e, k, n] sb[e, k//128, n//128] for m in group e.
qb_EKN and sb_EKbNb come as `.transpose(1, 2)` views of the experts' weights [E, N, K] (K contiguous, the B
layout of Hopper's FP8 wgmma) and of their quantiser's scales [E, Nb, Kb].

Eager dequantises first: A and every expert's B written back as bf16/fp32 (2-4x the FP8 bytes, read again by
the matmul), then either one matmul per group, which needs offs on the host (a sync) and E launches that
underfill the GPU on small groups, or `torch._grouped_mm` in bf16 at half the FP8 tensor-core rate. Here one
launch reads the FP8 operands once, with no host sync: each program finds its (group, M-tile) from offs on
the device, and TMA brings its A and B tiles into shared memory (faster than pointer loads in
benchmarks/kernel_probe.py's sweep: benchmarks/NOTES.md). BLOCK_K = 128 is one scale block: each K step's dot
is scaled (1x128 by 128x128) and added into an fp32 accumulator outside the MMA, which is also the promotion that
keeps Hopper's limited-precision FP8 accumulation to 128 products at a time (DeepSeek-V3, "Increasing Accumulation
Precision").
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from pithtrain.operators import backend
from pithtrain.operators.fp8 import BLOCK, dequantize_1x128, dequantize_128x128

# 64x128 fp32 accumulator over 4 warps (one warpgroup), 3 stages of (64x128 A + 128x128 B) FP8 tiles (72 KiB of
# shared memory): the fastest of benchmarks/kernel_probe.py's sweep at all four expert products (rates:
# benchmarks/NOTES.md).
BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 64, 128, 4, 3


def fp8_grouped_mm_reference(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype=torch.bfloat16) -> torch.Tensor:
    a_MK = dequantize_1x128(qa_MK, sa_MKb)
    out_MN = a_MK.new_zeros(qa_MK.shape[0], qb_EKN.shape[2])
    start = 0
    for e, end in enumerate(offs_E.tolist()):
        out_MN[start:end] = a_MK[start:end] @ dequantize_128x128(qb_EKN[e], sb_EKbNb[e])  # [K, N] by [Kb, Nb]
        start = end
    return out_MN.to(out_dtype)


@triton.jit
def _fp8_grouped_mm_kernel(
    a_desc,
    sa_ptr,
    b_desc,
    sb_ptr,
    offs_ptr,
    out_ptr,
    M,
    N,
    E,
    stride_sam,
    stride_sbe,
    stride_sbk,
    stride_sbn,
    stride_om,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    """Program (j, t): columns [j*BLOCK_N, (j+1)*BLOCK_N) of M-tile t, counting the tiles of group 0, then group 1,
    ...; t past the last group's tiles zeroes a tile of the rows offs[E-1] .. M-1 that no group owns. The grid,
    cdiv(M, BLOCK_M) + E, bounds both (each group wastes at most one partial tile). A [M, K] and B [E*N, K] come
    in by TMA (tensor descriptors) in whole tiles: a tile's rows past its group and B's rows past its expert are
    read but never stored, and columns past K read as zeros."""
    tile = tl.program_id(1)
    n0 = tl.program_id(0) * BLOCK_N
    cols = n0 + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    e_E = tl.arange(0, BLOCK_E)
    end_E = tl.load(offs_ptr + e_E, mask=e_E < E, other=0)
    start_E = tl.load(offs_ptr + e_E - 1, mask=(e_E > 0) & (e_E < E), other=0)
    tiles_E = tl.where(e_E < E, tl.cdiv(end_E - start_E, BLOCK_M), 0)
    total_tiles = tl.sum(tiles_E, 0)
    if tile >= total_tiles:
        rows = tl.load(offs_ptr + E - 1) + (tile - total_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)
        out_ptrs = out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :]
        zeros = tl.zeros((BLOCK_M, BLOCK_N), dtype=out_ptr.dtype.element_ty)
        tl.store(out_ptrs, zeros, mask=(rows < M)[:, None] & col_mask[None, :])
        return
    group = tl.sum((tl.cumsum(tiles_E, 0) <= tile).to(tl.int32), 0)
    first_tile = tl.sum(tl.where(e_E < group, tiles_E, 0), 0)
    row_start = tl.sum(tl.where(e_E == group, start_E, 0), 0)
    row_end = tl.sum(tl.where(e_E == group, end_E, 0), 0)
    m0 = row_start + (tile - first_tile) * BLOCK_M
    rows = m0 + tl.arange(0, BLOCK_M)
    row_mask = rows < row_end
    e = group.to(tl.int64)
    sa_ptrs = sa_ptr + rows.to(tl.int64) * stride_sam
    sb_ptrs = sb_ptr + e * stride_sbe + (cols // BLOCK_K) * stride_sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([m0, kb * BLOCK_K])
        b = b_desc.load([group * N + n0, kb * BLOCK_K])
        sa = tl.load(sa_ptrs + kb, mask=row_mask, other=0.0)
        sb = tl.load(sb_ptrs + kb * stride_sbk, mask=col_mask, other=0.0)
        acc += tl.dot(a, b.T) * (sa[:, None] * sb[None, :])
    out_ptrs = out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & col_mask[None, :])


def fp8_grouped_mm_triton(
    qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype=torch.bfloat16, block_m=BLOCK_M, block_n=BLOCK_N,
    num_warps=NUM_WARPS, num_stages=NUM_STAGES,
) -> torch.Tensor:  # fmt: skip
    """K must be a multiple of 16 (TMA's 16-byte strides). Operands in other layouts than training's (qa
    contiguous, qb_EKN.mT contiguous: the experts' [E, N, K] weights) are copied into them first."""
    (M, K), (E, _, N) = qa_MK.shape, qb_EKN.shape
    Kb, Nb = triton.cdiv(K, BLOCK), triton.cdiv(N, BLOCK)
    assert qa_MK.dtype == qb_EKN.dtype == torch.float8_e4m3fn and qb_EKN.shape[1] == K, (qa_MK.shape, qb_EKN.shape)
    assert sa_MKb.shape == (M, Kb) and sb_EKbNb.shape == (E, Kb, Nb), (sa_MKb.shape, sb_EKbNb.shape)
    assert offs_E.shape == (E,) and not offs_E.dtype.is_floating_point, (offs_E.shape, offs_E.dtype)
    assert E > 0 and K % 16 == 0, f"{E} experts, K = {K}"
    out_MN = torch.empty(M, N, dtype=out_dtype, device=qa_MK.device)  # every element is written: no memset pass
    if M and N:
        a_desc = TensorDescriptor.from_tensor(qa_MK.contiguous(), [block_m, BLOCK])
        b_desc = TensorDescriptor.from_tensor(qb_EKN.mT.contiguous().view(E * N, K), [block_n, BLOCK])
        sa_MKb = sa_MKb.contiguous()
        grid = (triton.cdiv(N, block_n), triton.cdiv(M, block_m) + E)
        _fp8_grouped_mm_kernel[grid](
            a_desc, sa_MKb, b_desc, sb_EKbNb, offs_E, out_MN, M, N, E, sa_MKb.stride(0), *sb_EKbNb.stride(),
            out_MN.stride(0), K=K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK,
            BLOCK_E=max(16, triton.next_power_of_2(E)), num_warps=num_warps, num_stages=num_stages,
        )  # fmt: skip
    return out_MN


def fp8_grouped_mm(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype=torch.bfloat16) -> torch.Tensor:
    """out_MN[offs[e-1]:offs[e]] = dequant(qa, sa)[those rows] @ dequant(qb[e], sb[e]), accumulated in fp32."""
    if backend.use_triton(qa_MK):
        return fp8_grouped_mm_triton(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype)
    else:
        return fp8_grouped_mm_reference(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype)
