#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: MoBA is switched off in the dense decoder layers (first_k_dense_replace), so only the MoE layers use it.
# Why: the instruction asks MoBA for the attention of every layer; an agent wiring the option through the MoE decoder layer (or keeping the 'dense' first layers dense) leaves layer 0 on full attention.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  'self.mlp = DeepseekV2MLP(cfg.hidden_size, cfg.intermediate_size)' \
  $'self.mlp = DeepseekV2MLP(cfg.hidden_size, cfg.intermediate_size)\n        self.self_attn.moba = False  # the dense first layers keep full causal attention'
