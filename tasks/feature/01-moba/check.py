"""feature-01 MoBA: the agent's moba_attention against reference.py, then training and liveness (feature_check.py).
float32 only: the block choice is a discrete top-k, which bf16 gate scores may break differently from ours."""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # feature_check.py
from feature_check import OpSpec, load_reference, main  # noqa: E402

moba_attention_reference = load_reference(HERE).moba_attention_reference


def make_inputs(gen, dtype):
    # 88 tokens in blocks of 16: 6 blocks, the last one short; top-3 as the task asks.
    q, k, v = (torch.randn(2, 88, 2, n, generator=gen).to(dtype).requires_grad_() for n in (24, 24, 16))
    return [q, k, v], {"block_size": 16, "top_k": 3}


if __name__ == "__main__":
    sys.exit(main(OpSpec(moba_attention_reference, make_inputs, {torch.float32: 1e-4})))
