#!/usr/bin/env bash
# Near miss for 02-dynmoe on megatron-lm, which must FAIL: the gold with one rule broken (the sign has no straight-through gradient).
# Why: the instruction passes the gradient straight through the sign so that the expert vectors and thresholds learn; a detached sign gives the gate's inputs no gradient (the op check's gradients differ from the reference's).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/dynmoe.patch" \
  '_SignStraightThrough.apply(margin)' \
  'torch.sign(margin).detach()'
