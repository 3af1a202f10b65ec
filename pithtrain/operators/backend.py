"""The one rule for choosing an operator's Triton kernel or its PyTorch reference.

CUDA tensors run the kernel. CPU tensors run the reference, except under TRITON_INTERPRET=1, where
triton executes kernels on the CPU with numpy (this is how `tests/test_operators.py` checks them).
triton reads TRITON_INTERPRET once, when `triton.language` is first imported (its own helpers such
as `tl.sum` are decorated then), so the variable must be set before that: setting it later makes the
kernels fail on CPU tensors with "0 active drivers", never silently fall back.
"""

import os

import torch


def use_triton(x: torch.Tensor) -> bool:
    return x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"
