#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the model computes the auxiliary loss on the L2-normalised expert vectors (as the cosine gate sees them), not on the learnable vectors themselves.
# Why: The aux loss must be computed on the expert vectors of each gate, keeping them diverse AND small; since the gate scores by cosine an agent may pass the normalised vectors, which makes the mean-squared-norm term a constant (no shrinkage) and changes the orthogonality gradient.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'topk_w_TK = AttachAuxLoss.apply(topk_w_TK, dynmoe_aux_loss(vectors_ED) * aux_loss_scale)' \
  'topk_w_TK = AttachAuxLoss.apply(topk_w_TK, dynmoe_aux_loss(F.normalize(vectors_ED, dim=-1)) * aux_loss_scale)'
