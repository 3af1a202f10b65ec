#!/usr/bin/env bash
# Near miss for 03-diff-attention on torchtitan, which must FAIL: the model passes q1, q2 already multiplied by the layer's softmax scale 1/sqrt(qk_head_dim), so the scores are scaled twice.
# Why: The instruction says to pass q unscaled and let the function apply 1/sqrt(d); reusing the model's softmax_scale on q (as the baseline SDPA did via scale=) double-scales.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/diff-attention.patch" \
  $'                q1 * yarn,\n                k1,\n                q2 * yarn,\n' \
  $'                q1 * self.softmax_scale,\n                k1,\n                q2 * self.softmax_scale,\n'
