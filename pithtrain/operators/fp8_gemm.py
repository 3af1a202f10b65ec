"""Block-scaled FP8 grouped matmul for the MoE experts (DeepSeek-V3, section 3.3.2): out = A_e @ B_e per group.

Shapes: M routed rows sorted by expert, K reduction (hidden or FFN width), N output width, E experts on this rank;
Kb = ceil(K/128), Nb = ceil(N/128). `offs_E[e]` is one past group e's last row (`torch._grouped_mm`'s `offs`):
group e owns rows offs[e-1] .. offs[e]-1 (from 0 for e = 0) and may be empty; rows offs[E-1] .. M-1 come out zero.
Scales follow `fp8.py`: sa_MKb one per row per 128 columns of K (1x128), sb_EKbNb one per 128x128 tile of
B_e; out[m, n] = sum_k qa[m, k] sa[m, k//128] qb[e, k, n] sb[e, k//128, n//128] for m in group e.
qb_EKN and sb_EKbNb take any strides: the experts' weights are [E, N, K] (K contiguous, the B layout of
Hopper's FP8 wgmma) and their quantiser's scales [E, Nb, Kb], both passed as `.transpose(1, 2)` views.

Eager dequantises first: A and every expert's B written back as bf16/fp32 (2-4x the FP8 bytes, read again by
the matmul), then either one matmul per group, which needs offs on the host (a sync) and E launches that
underfill the GPU on small groups, or `torch._grouped_mm` in bf16 at half the FP8 tensor-core rate. Here one
launch reads the FP8 operands once, with no host sync: each program finds its (group, M-tile) from offs on
the device. BLOCK_K = 128 is one scale block: each K step's dot is scaled (1x128 by 128x128) and added into
an fp32 accumulator outside the MMA, which is also the promotion that keeps Hopper's limited-precision FP8
accumulation to 128 products at a time (DeepSeek-V3, "Increasing Accumulation Precision").
"""

import torch
import triton
import triton.language as tl

from pithtrain.operators import backend
from pithtrain.operators.fp8 import BLOCK, dequantize_1x128, dequantize_128x128

# 64x128 fp32 accumulator over 4 warps (one warpgroup); 4 stages of (64x128 A + 128x128 B) FP8 tiles = 96 KiB of
# shared memory. The fastest of benchmarks/kernel_probe.py's sweep on the H200 at all four expert products
# (results/kernel_probe/20261130T1247Z-h200.txt): 492-535 TFLOP/s against 481-503 for 128x128 over 8 warps.
BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 64, 128, 4, 4


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
    a_ptr,
    sa_ptr,
    b_ptr,
    sb_ptr,
    offs_ptr,
    out_ptr,
    M,
    N,
    E,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_sbe,
    stride_sbk,
    stride_sbn,
    stride_om,
    K: tl.constexpr,  # a loop bound: constexpr (one compile per width) also keeps triton 3.6's interpreter happy
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    """Program (j, t): columns [j*BLOCK_N, (j+1)*BLOCK_N) of M-tile t, counting the tiles of group 0, then group 1,
    ...; t past the last group's tiles zeroes a tile of the rows offs[E-1] .. M-1 that no group owns. The grid,
    cdiv(M, BLOCK_M) + E, bounds both (each group wastes at most one partial tile)."""
    tile = tl.program_id(1)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
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
    group = tl.sum((tl.cumsum(tiles_E, 0) <= tile).to(tl.int32), 0)  # groups whose tiles all precede this one
    first_tile = tl.sum(tl.where(e_E < group, tiles_E, 0), 0)
    row_start = tl.sum(tl.where(e_E == group, start_E, 0), 0)
    row_end = tl.sum(tl.where(e_E == group, end_E, 0), 0)

    rows = row_start + (tile - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < row_end
    rows = rows.to(tl.int64)
    ks = tl.arange(0, BLOCK_K)
    e = group.to(tl.int64)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + e * stride_be + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    sa_ptrs = sa_ptr + rows * stride_sam
    sb_ptrs = sb_ptr + e * stride_sbe + (cols // BLOCK_K) * stride_sbn  # BLOCK_K == 128: B's scale block
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = ks < K - kb * BLOCK_K
        a = tl.load(a_ptrs, mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & col_mask[None, :], other=0.0)
        sa = tl.load(sa_ptrs + kb * stride_sak, mask=row_mask, other=0.0)
        sb = tl.load(sb_ptrs + kb * stride_sbk, mask=col_mask, other=0.0)
        acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & col_mask[None, :])


@triton.jit
def _fp8_grouped_mm_tma_kernel(
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
    """As _fp8_grouped_mm_kernel, with A [M, K] and B [E*N, K] read by TMA (tensor descriptors, whole 128-wide K
    blocks: K % 128 == 0). A tile's rows past its group, and B rows past its expert, are read but never stored."""
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
    for kb in range(0, K // BLOCK_K):
        a = a_desc.load([m0, kb * BLOCK_K])
        b = b_desc.load([group * N + n0, kb * BLOCK_K])
        sa = tl.load(sa_ptrs + kb, mask=row_mask, other=0.0)
        sb = tl.load(sb_ptrs + kb * stride_sbk, mask=col_mask, other=0.0)
        acc += tl.dot(a, b.T) * (sa[:, None] * sb[None, :])
    out_ptrs = out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & col_mask[None, :])


def fp8_grouped_mm_tma(
    qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype=torch.bfloat16, block_m=64, block_n=128, num_warps=4,
    num_stages=4,
) -> torch.Tensor:  # fmt: skip
    """fp8_grouped_mm_triton through TMA loads: K % 128 == 0, qa contiguous, qb_EKN.mT contiguous ([E, N, K])."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    (M, K), (E, _, N) = qa_MK.shape, qb_EKN.shape
    assert K % BLOCK == 0 and qa_MK.is_contiguous() and qb_EKN.mT.is_contiguous() and sa_MKb.stride(1) == 1
    out_MN = torch.empty(M, N, dtype=out_dtype, device=qa_MK.device)
    if M and N:
        a_desc = TensorDescriptor.from_tensor(qa_MK, [block_m, BLOCK])
        b_desc = TensorDescriptor.from_tensor(qb_EKN.mT.reshape(E * N, K), [block_n, BLOCK])
        grid = (triton.cdiv(N, block_n), triton.cdiv(M, block_m) + E)
        _fp8_grouped_mm_tma_kernel[grid](
            a_desc, sa_MKb, b_desc, sb_EKbNb, offs_E, out_MN, M, N, E, sa_MKb.stride(0), *sb_EKbNb.stride(),
            out_MN.stride(0), K=K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK,
            BLOCK_E=max(16, triton.next_power_of_2(E)), num_warps=num_warps, num_stages=num_stages,
        )  # fmt: skip
    return out_MN


def fp8_grouped_mm_triton(
    qa_MK,
    sa_MKb,
    qb_EKN,
    sb_EKbNb,
    offs_E,
    out_dtype=torch.bfloat16,
    block_m=BLOCK_M,
    block_n=BLOCK_N,
    num_warps=NUM_WARPS,
    num_stages=NUM_STAGES,
) -> torch.Tensor:
    (M, K), (E, _, N) = qa_MK.shape, qb_EKN.shape
    Kb, Nb = triton.cdiv(K, BLOCK), triton.cdiv(N, BLOCK)
    assert qa_MK.dtype == qb_EKN.dtype == torch.float8_e4m3fn and qb_EKN.shape[1] == K, (qa_MK.shape, qb_EKN.shape)
    assert sa_MKb.shape == (M, Kb) and sb_EKbNb.shape == (E, Kb, Nb), (sa_MKb.shape, sb_EKbNb.shape)
    assert offs_E.shape == (E,) and not offs_E.dtype.is_floating_point, (offs_E.shape, offs_E.dtype)
    assert E > 0, "no experts"
    out_MN = torch.empty(M, N, dtype=out_dtype, device=qa_MK.device)  # every element is written: no memset pass
    if M and N:
        grid = (triton.cdiv(N, block_n), triton.cdiv(M, block_m) + E)
        _fp8_grouped_mm_kernel[grid](
            qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_MN, M, N, E,
            *qa_MK.stride(), *sa_MKb.stride(), *qb_EKN.stride(), *sb_EKbNb.stride(), out_MN.stride(0),
            K=K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK, BLOCK_E=max(16, triton.next_power_of_2(E)),
            num_warps=num_warps, num_stages=num_stages,
        )  # fmt: skip
    return out_MN


def fp8_grouped_mm(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype=torch.bfloat16) -> torch.Tensor:
    """out_MN[offs[e-1]:offs[e]] = dequant(qa, sa)[those rows] @ dequant(qb[e], sb[e]), accumulated in fp32."""
    if backend.use_triton(qa_MK):
        return fp8_grouped_mm_triton(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype)
    else:
        return fp8_grouped_mm_reference(qa_MK, sa_MKb, qb_EKN, sb_EKbNb, offs_E, out_dtype)
