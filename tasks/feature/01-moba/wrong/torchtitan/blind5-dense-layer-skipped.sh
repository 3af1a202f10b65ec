#!/usr/bin/env bash
# Near miss for 01-moba on torchtitan, which must FAIL: MoBA is switched off in the dense decoder layers (n_dense_layers), so only the MoE layers use it.
# Why: the instruction asks MoBA for the attention of every layer; an agent wiring the option through the MoE block
# (or keeping the 'dense' first layers dense) leaves layer 0 on full attention (the seam sees calls from 3 of 4 layers).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moba.patch" \
  'self.feed_forward = FeedForward(model_args.dim, model_args.inter_dim)' \
  $'self.feed_forward = FeedForward(model_args.dim, model_args.inter_dim)\n            self.attention.moba = False  # the dense first layers keep full causal attention'
