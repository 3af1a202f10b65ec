"""Process-wide matmul precision. `tasks.pretrain_lm.setup` sets it once from `training.precision`; model code
reads it module-qualified (`precision.fp8`) at the few call sites that can run FP8 (see AGENTS.md)."""

fp8: bool = False
"""Attention projections, routed experts and the head run FP8 matmuls (operators/fp8_linear.py, fp8_gemm.py,
cross_entropy.py)."""
