#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the second term of the auxiliary loss is the mean of the squared entries, not the mean over experts of each vector's squared norm (smaller by a factor hidden).
# Why: the instruction asks the mean squared norm of the vectors; .pow(2).mean() reads as 'mean squared' but averages over the hidden axis too.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'vectors_ED.pow(2).sum(-1).mean()' \
  'vectors_ED.pow(2).mean()'
