"""feature-04 MoE++: the agent's moepp_expert_mix against reference.py (output and routed logits, forward and
gradients), then training and liveness (feature_check.py). float32 only: routing is a discrete top-k."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import OpSpec, load_reference, main  # noqa: E402

moepp_expert_mix_reference = load_reference(HERE).moepp_expert_mix_reference


def make_inputs(gen, dtype):
    T, D, F, C = 32, 16, 6, 2
    E = F + 1 + 1 + C
    x = torch.randn(T, D, generator=gen).to(dtype).requires_grad_()
    logits, prev_logits = (torch.randn(T, E, generator=gen).to(dtype).requires_grad_() for _ in range(2))
    residual_weight = (0.3 * torch.randn(E, E, generator=gen)).to(dtype).requires_grad_()
    ffn_out = torch.randn(T, F, D, generator=gen).to(dtype).requires_grad_()
    const_vectors = torch.randn(C, D, generator=gen).to(dtype).requires_grad_()
    const_gate_weight = torch.randn(C, 2, D, generator=gen).to(dtype).requires_grad_()
    args = [x, logits, prev_logits, residual_weight, ffn_out, const_vectors, const_gate_weight]
    return args, {"top_k": 2, "num_zero": 1, "num_copy": 1}


if __name__ == "__main__":
    spec = OpSpec(moepp_expert_mix_reference, make_inputs, {torch.float32: 1e-4}, outputs=lambda out: list(out))
    sys.exit(main(spec))
