"""Lets TorchTitan 0.2.2 train on a CPU build of torch: the smoke profile's TorchTitan runs (the operate and feature
tasks provide it as cpu_standin/, a link here; their scripts and golds put it on PYTHONPATH); never used on a GPU.

    PYTHONPATH=$PYTHONPATH:$PWD/cpu_standin TORCHTITAN_CPU_STANDIN=1 OMP_NUM_THREADS=1 bash train.sh

Python imports `sitecustomize` at start-up from PYTHONPATH, in every process (torchrun's workers and a venv's Python
too); without TORCHTITAN_CPU_STANDIN=1 it does nothing. What it patches is exactly what stops TorchTitan on the CPU:
the device TorchTitan picks at import ('cuda' when no accelerator is found), the torch.cpu functions it calls as if
they were torch.cuda's, torch.histc, which has no CPU kernel for the int64 expert ids its MoE router counts, and the
profiler's activity list (None for the missing accelerator). The model and its arithmetic are TorchTitan's.
"""

import os


def count_histc_in_float() -> None:
    """torch.histc over int64 ids (TorchTitan's MoE router counting tokens per expert) has no CPU kernel: count in
    float, exact for these counts, and cast back. Also called by the operate checkers, which run TorchTitan's model
    in their own process (tasks/operate/operate_check.py)."""
    import torch

    if getattr(torch.histc, "counts_in_float", False):
        return
    histc = torch.histc

    def float_histc(x, *a, **k):
        return histc(x.float(), *a, **k).to(x.dtype)

    float_histc.counts_in_float = True
    torch.histc = float_histc


if os.environ.get("TORCHTITAN_CPU_STANDIN") == "1":
    import types

    import torch
    import torch._utils
    import torch.profiler

    torch._utils._get_available_device_type = lambda: "cpu"
    standins = {
        "set_device": lambda device: None,
        "get_device_name": lambda device=None: "cpu",
        "get_device_properties": lambda device: types.SimpleNamespace(total_memory=64 * 2**30),
        "reset_peak_memory_stats": lambda *a: None,
        "empty_cache": lambda: None,
        "memory_stats": lambda *a: {},
    }
    for name, fn in standins.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, fn)
    torch.cpu.current_device = lambda: 0  # torch.cpu's returns "cpu"; barrier(device_ids=[...]) needs an int

    count_histc_in_float()

    class _Profile(torch.profiler.profile):
        """TorchTitan lists CUDA or XPU activity, None on a CPU: drop the None."""

        def __init__(self, *a, activities=None, **k):
            super().__init__(*a, activities=[x for x in activities or [] if x is not None], **k)

    torch.profiler.profile = _Profile
