#!/usr/bin/env bash
# Gold for feature-03 on megatron-lm: differential attention as --diff-attention in Megatron-LM's multi-latent attention
# at the pin 3bec9aa (diff-attention.patch: an MLATransformerConfig field that core_transformer_config_from_args
# copies from the argument of that name; per layer, four lambda vectors and a norm weight, lambda_init by the layer's
# depth; differential_attention called on the halves of q and k after RoPE in place of the core attention), and
# feature.json. --diff-attention is off by default and, like Megatron's other switches, has no off form: "disable" is
# [] (the base run's arguments). Nothing in it depends on the profile.
set -euo pipefail
git apply "$GOLD_DIR/diff-attention.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
