#!/usr/bin/env bash
# Gold for feature-01 on megatron-lm: MoBA as --moba (with --moba-block-size, --moba-top-k) in Megatron-LM's
# multi-latent attention at the pin 3bec9aa (moba.patch: MLATransformerConfig fields that
# core_transformer_config_from_args copies from the arguments of the same name; moba_attention called on q and k after
# RoPE in place of the core attention), and feature.json with the block size that cuts the profile's sequence
# (verify.sh prints it) into 8 blocks, top-3 as the task asks. --moba is off by default and, like Megatron's other
# switches, has no off form: "disable" is [] (the base run's arguments).
set -euo pipefail
git apply "$GOLD_DIR/moba.patch"
seq_len=$(sed -n 's/.*sequence length: \([0-9][0-9]*\).*/\1/p' verify.sh | head -n 1)
[ -n "$seq_len" ] || { echo "verify.sh prints no 'sequence length: N'" >&2; exit 1; }
mkdir -p artifacts
printf '{"op": "megatron.core.transformer.multi_latent_attention:moba_attention", "enable": ["--moba", "--moba-block-size", "%d", "--moba-top-k", "3"], "disable": []}\n' \
  $((seq_len / 8)) > artifacts/feature.json
