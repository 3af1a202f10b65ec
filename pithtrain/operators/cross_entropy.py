"""Output head + cross-entropy, summed over tokens, in chunks of tokens.

Shapes: T tokens, D hidden, V vocab, C tokens per chunk.

Eager `F.cross_entropy(F.linear(h, W).float(), labels, reduction="sum")` materialises the logits for
every token at once: [T, V] in the input dtype, an fp32 copy, and softmax's fp32 output kept for
backward; for Qwen3 (V = 151,936) and T = 16K tokens that is about 10 GB per fp32 copy. Here the head
and the fp32 log-softmax run on C tokens at a time, and only h, W, the labels and one fp32 log-sum-exp
per token are kept; the backward recomputes each chunk's logits (one more head matmul) to form
grad h and grad W, so peak memory holds a few [C, V] chunks instead of [T, V]. Logits are computed in
the input dtype and promoted to fp32, exactly as the reference, so the loss matches it to summation
order. Plain PyTorch: the matmuls dominate and cuBLAS runs them; a Triton kernel could fuse the
softmax passes over a chunk, but chunking is what removes the memory.
"""

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def linear_cross_entropy_reference(h_TD: torch.Tensor, W_VD: torch.Tensor, labels_T: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(F.linear(h_TD, W_VD).float(), labels_T, ignore_index=IGNORE_INDEX, reduction="sum")


class LinearCrossEntropy(torch.autograd.Function):
    """Sum of token cross-entropies of logits h_TD @ W_VD^T, C tokens at a time; label -100 is ignored."""

    @staticmethod
    def forward(ctx, h_TD, W_VD, labels_T, chunk_size: int):
        assert h_TD.dim() == 2 and labels_T.shape == h_TD.shape[:1], f"h {h_TD.shape}, labels {labels_T.shape}"
        assert h_TD.dtype == W_VD.dtype, f"h is {h_TD.dtype} but W is {W_VD.dtype}"
        loss = torch.zeros((), dtype=torch.float32, device=h_TD.device)
        lse_T = torch.zeros(h_TD.shape[0], dtype=torch.float32, device=h_TD.device)
        for s in range(0, h_TD.shape[0], chunk_size):
            labels_C = labels_T[s : s + chunk_size]
            logits_CV = F.linear(h_TD[s : s + chunk_size], W_VD).float()
            lse_T[s : s + chunk_size] = lse_C = torch.logsumexp(logits_CV, dim=-1)
            valid_C = labels_C != IGNORE_INDEX
            target_C = logits_CV.gather(1, torch.where(valid_C, labels_C, 0)[:, None]).squeeze(1)
            loss += torch.where(valid_C, lse_C - target_C, 0.0).sum()
        ctx.save_for_backward(h_TD, W_VD, labels_T, lse_T)
        ctx.chunk_size = chunk_size
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        h_TD, W_VD, labels_T, lse_T = ctx.saved_tensors
        grad_h_TD = torch.empty_like(h_TD) if ctx.needs_input_grad[0] else None
        # Summed over chunks in fp32: adding per-chunk bf16 products would round once per chunk.
        grad_W_VD = (
            torch.zeros(W_VD.shape, dtype=torch.float32, device=W_VD.device) if ctx.needs_input_grad[1] else None
        )
        for s in range(0, h_TD.shape[0], ctx.chunk_size):
            labels_C, h_CD = labels_T[s : s + ctx.chunk_size], h_TD[s : s + ctx.chunk_size]
            valid_C = labels_C != IGNORE_INDEX
            # d loss / d logits = softmax - onehot(label), zero for ignored tokens.
            grad_CV = F.linear(h_CD, W_VD).float().sub_(lse_T[s : s + ctx.chunk_size, None]).exp_()
            grad_CV[torch.arange(len(labels_C), device=grad_CV.device), torch.where(valid_C, labels_C, 0)] -= 1.0
            grad_CV = grad_CV.mul_(valid_C[:, None] * grad_loss).to(h_TD.dtype)
            if grad_h_TD is not None:
                grad_h_TD[s : s + ctx.chunk_size] = grad_CV @ W_VD
            if grad_W_VD is not None:
                grad_W_VD += grad_CV.t() @ h_CD
        return grad_h_TD, None if grad_W_VD is None else grad_W_VD.to(W_VD.dtype), None, None


def linear_cross_entropy(h_TD: torch.Tensor, W_VD: torch.Tensor, labels_T: torch.Tensor, chunk_size: int = 1024):
    """Summed cross-entropy of `F.linear(h_TD, W_VD)` against labels_T (-100 ignored), an fp32 scalar,
    never holding more than chunk_size tokens' logits."""
    return LinearCrossEntropy.apply(h_TD, W_VD, labels_T, chunk_size)
