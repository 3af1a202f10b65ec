#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the aux loss's norm term is the mean of the squared entries, not the mean over experts of the squared norms.
# Why: The rule is the mean squared norm of the vectors (sum over hidden, mean over experts); .pow(2).mean() averages over all entries, D times smaller, a common slip when 'mean squared' is read literally.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'vectors_ED.pow(2).sum(-1).mean()' \
  'vectors_ED.pow(2).mean()'
