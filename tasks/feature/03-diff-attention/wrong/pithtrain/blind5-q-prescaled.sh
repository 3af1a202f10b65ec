#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the model passes q1, q2 already multiplied by the layer's softmax scale 1/sqrt(Dq), so the scores are scaled twice.
# Why: The instruction says to pass q unscaled and let the function apply 1/sqrt(d); reusing the model's softmax_scale on q (as the baseline SDPA did via scale=) double-scales.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  '(q1 * yarn).transpose(1, 2), k1.transpose(1, 2), (q2 * yarn).transpose(1, 2), k2.transpose(1, 2),' \
  '(q1 * self.softmax_scale).transpose(1, 2), k1.transpose(1, 2), (q2 * self.softmax_scale).transpose(1, 2), k2.transpose(1, 2),'
