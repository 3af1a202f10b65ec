"""feature-02 DynMoE: the agent's dynmoe_gate against reference.py (forward and the straight-through gradients),
then training and liveness (feature_check.py). float32 only: activation is a discrete threshold test."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import OpSpec, load_reference, main  # noqa: E402

dynmoe_gate_reference = load_reference(HERE).dynmoe_gate_reference


def make_inputs(gen, dtype):
    x = torch.randn(64, 32, generator=gen).to(dtype).requires_grad_()
    expert_vectors = torch.randn(16, 32, generator=gen).to(dtype).requires_grad_()
    thresholds = (0.3 * torch.randn(16, generator=gen)).to(dtype).requires_grad_()
    return [x, expert_vectors, thresholds], {"k_max": 4}  # k_max 4 of 16: the cap and the fallback both occur


if __name__ == "__main__":
    sys.exit(main(OpSpec(dynmoe_gate_reference, make_inputs, {torch.float32: 1e-4})))
