#!/usr/bin/env bash
# Near miss for 02-dynmoe on torchtitan, which must FAIL: the router computes the auxiliary loss on the L2-normalised expert vectors (as the cosine gate sees them), not on the learnable vectors themselves.
# Why: the aux loss must be computed on the expert vectors of each gate, keeping them diverse AND small; since the gate scores by cosine an agent may pass the normalised vectors, which makes the mean-squared-norm term a constant (no shrinkage) and changes the orthogonality gradient (the seam matches no gate call's vectors by value).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/dynmoe.patch" \
  'dynmoe_aux_loss(expert_vectors) * self.dynmoe_aux_loss_coef' \
  'dynmoe_aux_loss(F.normalize(expert_vectors, dim=-1)) * self.dynmoe_aux_loss_coef'
