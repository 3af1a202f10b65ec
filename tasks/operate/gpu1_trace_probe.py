"""The analysis half of tasks/operate/gpu1_trace_probe.sh: the gold run's step-1 tokens and first router input, and
its step-1 trace, against the checker's batch and transformers' recompute.

    python tasks/operate/gpu1_trace_probe.py WORKSPACE
"""

import sys
from pathlib import Path

import numpy as np
import torch

TASK = Path(__file__).resolve().parent / "03-routing-trace"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
sys.path[:0] = [str(TASK), str(TASK.parent)]
import check  # noqa: E402
import operate_check as oc  # noqa: E402

ws = Path(sys.argv[1])
art = ws / "artifacts"
batches = check.megatron_step1_batches(TASK, "gpu1", oc.provided(TASK, "gpu1", "megatron-lm", "data"))
batch = batches["with --append-eod"]
run = np.load(art / "probe-step1-tokens.npy")
print("run tokens", run.shape, "checker batch", batch.shape, "equal:", np.array_equal(run, batch))
for i in range(min(len(run), len(batch))):
    diff = np.flatnonzero(run[i] != batch[i])
    print(f"  seq {i}: {len(diff)} positions differ, first at {diff[:1].tolist()}; run {run[i, :8].tolist()}")
config, checkpoint = oc.provided(TASK, "gpu1", "pithtrain", "checkpoint"), ws / "checkpoint"
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

cfg = AutoConfig.from_pretrained(config)
cfg.num_hidden_layers = cfg.first_k_dense_replace + 1
model = AutoModelForCausalLM.from_pretrained(checkpoint, config=cfg, dtype=torch.float32).to(DEVICE).eval()
taken = []
hook = model.model.layers[cfg.first_k_dense_replace].mlp.register_forward_pre_hook(lambda m, i: taken.append(i[0]))
with torch.no_grad():
    model(torch.from_numpy(run[:2].astype(np.int64)).to(DEVICE))
hook.remove()
want = taken[0].float().cpu().numpy()  # (2, S, H)
got = np.load(art / "probe-router-input.npy")  # (64, 2, H): sequence-major, micro-batch 0
print("router input", got.shape, "transformers", want.shape)
for b in range(2):
    a, w = got[:, b], want[b, :64]
    cos = (a * w).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(w, axis=-1))
    norms = [" ".join(f"{n:.2f}" for n in np.linalg.norm(x, axis=-1)[:4]) for x in (a, w)]
    print(f"  seq {b}: cosine first 8 {' '.join(f'{c:.3f}' for c in cos[:8])}, min {cos.min():.3f}; norms {norms}")
with np.load(art / "routing-traces" / "step-00000001.npz") as f:
    trace = np.sort(f["expert_ids"], -1)
logits = check.hf_first_moe_router(config, checkpoint, run)
recomputed = np.sort(np.argsort(-logits, -1)[..., :6], -1)
for layer in range(trace.shape[0]):
    m = np.array([[(trace[layer, i] == recomputed[j]).all(-1).mean() for j in range(8)] for i in range(8)])
    print(
        f"trace layer {layer} seq i vs recompute on the run's tokens seq j: max {m.max():.3f}, diagonal "
        f"{' '.join(f'{d:.3f}' for d in np.diag(m))}"
    )
