#!/usr/bin/env bash
# Gold for feature-04 on megatron-lm: MoE++ in Megatron-Core's MoELayer (moe-plus-plus.patch), behind the
# TransformerConfig field moe_plus_plus (off by default). At the pin (3bec9aa) arguments.py builds the transformer
# flags from TransformerConfig's fields (ArgumentGroupFactory), so the field is the flag --moe-plus-plus, and
# core_transformer_config_from_args copies it back by name. The last 4 of --num-experts are the zero-computation
# experts (the profile's expert count is kept; the FFN experts are 4 fewer); TransformerBlock links each MoE layer to
# the one before it for the gating residual; the router's own load-balancing losses (--moe-router-load-balancing-type,
# --moe-aux-loss-coeff) are computed on softmax(routed logits) and ride on the layer's output through
# MoEAuxLossAutoScaler. --moe-plus-plus is a store_true flag with no off form, so "disable" is []: the default is off.
# The same on every profile.
set -euo pipefail
git apply "$GOLD_DIR/moe-plus-plus.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
