"""Gold for Report Heavy Kernels on megatron-lm: pretrain_gpt.py with its 4th training step profiled by torch.profiler
(CPU and CUDA activity), launched in its place with the same arguments:

    python -m torch.distributed.run --standalone --nproc-per-node 1 profile_step.py <pretrain_gpt.py's arguments>

Megatron's own --profile --use-pytorch-profiler records the step before --profile-step-end and saves it only when the
next step begins, so on a 4-step run it cannot keep step 4 alone: this wraps megatron.training.training.train_step
(looked up at every call by train()) and profiles its 4th call, with the device synchronised on both sides, then writes
the Chrome trace to artifacts/heavy-kernels/run/trace.json. Steps 1 to 3 are the warm-up.
"""

import runpy
import sys
from pathlib import Path

import megatron.training.training as training
import torch

OUT = Path("artifacts/heavy-kernels/run")
PROFILED = 4
train_step = training.train_step
calls = [0]


def profiled_train_step(*args, **kwargs):
    calls[0] += 1
    if calls[0] != PROFILED:
        return train_step(*args, **kwargs)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        out = train_step(*args, **kwargs)
        torch.cuda.synchronize()
    OUT.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(OUT / "trace.json"))
    print(f"profiled training step {PROFILED} into {OUT / 'trace.json'}", flush=True)
    return out


training.train_step = profiled_train_step
if __name__ == "__main__":  # not again in a process spawned from this one (it imports this file as __mp_main__)
    sys.argv = ["pretrain_gpt.py", *sys.argv[1:]]
    runpy.run_path("pretrain_gpt.py", run_name="__main__")
