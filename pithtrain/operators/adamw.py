"""AdamW's update with the gradient-clipping factor applied inside the same pass.

Clipping scaled every gradient in place before the optimizer read it again: one more read and write of all
gradients (about 12 ms a step for the 5.6 G parameters of qwen3-30b-a3b-8l on an H200, benchmarks/NOTES.md).
torch's fused AdamW can divide by a `grad_scale` tensor, but it then writes the divided gradient back, which
keeps the write. Here one Triton pass per parameter reads parameter, gradient and both moments, multiplies the
gradient by the factor in registers and writes parameter and moments: the bytes of the update alone.

The state lives in the `torch.optim.AdamW` it is given, laid out as torch's fused AdamW lays it out (`step` a
0-d fp32 tensor on the parameter's device, `exp_avg`, `exp_avg_sq`), so checkpoints, their resharding and
`optimizer.step()` itself work unchanged on it. The update is torch's AdamW (decoupled weight decay, bias
corrections computed in fp64). On CPU (tests, the reference) it is `optimizer.step()` after scaling the gradients.
"""

import torch
import triton
import triton.language as tl

from pithtrain.operators import backend

BLOCK = 2048


@triton.jit
def _adamw_kernel(
    param_ptr,
    grad_ptr,
    exp_avg_ptr,
    exp_avg_sq_ptr,
    coefs_ptr,  # [step_size, 1 / sqrt(bias_correction2)] of this parameter, fp32
    grad_factor_ptr,
    numel,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    step_size = tl.load(coefs_ptr)
    inv_bias_correction2_sqrt = tl.load(coefs_ptr + 1)
    grad = tl.load(grad_ptr + offs, mask=mask).to(tl.float32) * tl.load(grad_factor_ptr)
    param = tl.load(param_ptr + offs, mask=mask).to(tl.float32)
    exp_avg = tl.load(exp_avg_ptr + offs, mask=mask).to(tl.float32)
    exp_avg_sq = tl.load(exp_avg_sq_ptr + offs, mask=mask).to(tl.float32)
    param = param - lr * weight_decay * param
    exp_avg = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    denom = tl.sqrt(exp_avg_sq) * inv_bias_correction2_sqrt + eps
    param = param - step_size * exp_avg / denom
    tl.store(param_ptr + offs, param.to(param_ptr.dtype.element_ty), mask=mask)
    tl.store(exp_avg_ptr + offs, exp_avg.to(exp_avg_ptr.dtype.element_ty), mask=mask)
    tl.store(exp_avg_sq_ptr + offs, exp_avg_sq.to(exp_avg_sq_ptr.dtype.element_ty), mask=mask)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t  # FSDP's DTensors: this rank's shard


def _check_group(group: dict) -> None:
    for option in ("amsgrad", "maximize", "capturable", "differentiable"):
        if group.get(option):
            raise ValueError(f"AdamW option {option}=True is not supported by operators/adamw.py; leave it off")


def adamw_step(optimizer: torch.optim.AdamW, grad_factor: torch.Tensor) -> None:
    """`optimizer.step()` with every gradient multiplied by `grad_factor` (a 0-d fp32 tensor on the parameters'
    device, e.g. the clipping coefficient). Parameters without a gradient are skipped, as torch skips them. The
    gradients themselves are left unscaled on the Triton path (the trainer clears them next)."""
    params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if not params or not backend.use_triton(_local(params[0])):
        torch._foreach_mul_([_local(p.grad) for p in params], grad_factor)
        optimizer.step()
        return
    for group in optimizer.param_groups:
        _check_group(group)
        with_grad = [p for p in group["params"] if p.grad is not None]
        if not with_grad:
            continue
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = float(group["lr"]), group["eps"], group["weight_decay"]
        states = [optimizer.state[p] for p in with_grad]
        for p, state in zip(with_grad, states):
            if not state:  # as torch's fused AdamW creates it
                state["step"] = torch.zeros((), dtype=torch.float32, device=_local(p).device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        steps = [state["step"] for state in states]
        torch._foreach_add_(steps, 1.0)
        # Bias corrections of every parameter in fp64 by a few tensor ops, no host read of the step counts.
        step_N = torch.stack(steps).double()
        step_size_N = lr / (1 - beta1**step_N)
        inv_bc2_sqrt_N = (1 - beta2**step_N).rsqrt()
        device = _local(with_grad[0]).device  # steps made by a non-fused torch AdamW live on the CPU
        coefs_N2 = torch.stack([step_size_N, inv_bc2_sqrt_N], 1).float().to(device)
        for i, (p, state) in enumerate(zip(with_grad, states)):
            tensors = [_local(t) for t in (p, p.grad, state["exp_avg"], state["exp_avg_sq"])]
            if not all(t.is_contiguous() for t in tensors):
                raise ValueError(
                    f"AdamW (operators/adamw.py): parameter {tuple(p.shape)} or its state is not contiguous"
                )
            numel = tensors[0].numel()
            if numel == 0:  # an FSDP shard can be empty
                continue
            grid = (triton.cdiv(numel, BLOCK),)
            _adamw_kernel[grid](
                *tensors, coefs_N2[i], grad_factor, numel, lr, beta1, beta2, eps, weight_decay, BLOCK=BLOCK, num_warps=8
            )
