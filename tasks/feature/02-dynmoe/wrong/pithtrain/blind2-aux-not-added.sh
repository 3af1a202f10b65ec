#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the diversity auxiliary loss is computed but never attached to the training loss.
# (Re-ported at import to freeze 2's gold, where the loss is the function dynmoe_aux_loss: the same edit.)
# Why: instruction: add the auxiliary loss ||W^T W - I||^2 plus the mean squared norm of the gate's expert vectors; here it is computed and kept on the module but never reaches the backward pass, so the expert vectors are not pushed toward diversity and small norm.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'topk_w_TK = AttachAuxLoss.apply(topk_w_TK, dynmoe_aux_loss(vectors_ED) * aux_loss_scale)' \
  'self.dynmoe_aux_loss = dynmoe_aux_loss(vectors_ED) * aux_loss_scale  # logged'
