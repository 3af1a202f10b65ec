#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: uses torch.sign on the margin without the straight-through estimator, so the gate vectors and thresholds get zero gradient.
# Why: DynMoE needs the gradient to pass straight through the sign; torch.sign has zero derivative, so the gate learns only from the aux loss.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  '_SignStraightThrough.apply(margin_TE)' \
  'torch.sign(margin_TE)'
