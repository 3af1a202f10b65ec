#!/usr/bin/env bash
# Gold for feature-02 on megatron-lm: DynMoE top-any gating in Megatron-Core's TopKRouter (dynmoe.patch), behind the
# TransformerConfig fields moe_dynmoe (off by default), moe_dynmoe_k_max (12) and moe_dynmoe_aux_loss_coeff (1e-2, as
# the other golds' weight). At the pin (3bec9aa) arguments.py builds the transformer flags from TransformerConfig's
# fields (ArgumentGroupFactory), so the fields are the flags --moe-dynmoe, --moe-dynmoe-k-max and
# --moe-dynmoe-aux-loss-coeff, and core_transformer_config_from_args copies them back by name. The router's rows are
# the expert vectors; its auxiliary loss rides on the routing probs through MoEAuxLossAutoScaler (the backward takes
# it, "lm loss" does not print it) and is logged as dynmoe_aux_loss. --moe-dynmoe is a store_true flag with no off
# form, so "disable" is []: the default is off. The same on every profile.
set -euo pipefail
git apply "$GOLD_DIR/dynmoe.patch"
mkdir -p artifacts
cp "$GOLD_DIR/feature.json" artifacts/feature.json
