"""feature-03 Differential attention: the agent's differential_attention against reference.py (forward and
gradients, lambda vectors and norm weight included), then training and liveness (feature_check.py). float32 is
the sharp check (1e-4); bf16 inputs allow 8e-2, since the lambda gradients sum whole attention maps in bf16
(a correct SDPA-based gold measured up to 3.6e-2)."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import OpSpec, load_reference, main  # noqa: E402

reference = load_reference(HERE)
differential_attention_reference = reference.differential_attention_reference
lambda_init_for_layer = reference.lambda_init_for_layer


def make_inputs(gen, dtype):
    q1, k1, q2, k2 = (torch.randn(2, 32, 3, 8, generator=gen).to(dtype).requires_grad_() for _ in range(4))
    v = torch.randn(2, 32, 3, 12, generator=gen).to(dtype).requires_grad_()
    lambdas = [(0.1 * torch.randn(8, generator=gen)).to(dtype).requires_grad_() for _ in range(4)]
    norm_weight = (torch.rand(12, generator=gen) + 0.5).to(dtype).requires_grad_()
    return [q1, k1, q2, k2, v, *lambdas, lambda_init_for_layer(3), norm_weight, 1e-5], {}


if __name__ == "__main__":
    sys.exit(main(OpSpec(differential_attention_reference, make_inputs, {torch.float32: 1e-4, torch.bfloat16: 8e-2})))
