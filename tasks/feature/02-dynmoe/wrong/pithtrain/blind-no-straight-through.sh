#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the activation uses plain sign() with no straight-through gradient, so the gate's vectors and thresholds get no gradient through it.
# Why: a_e = sign(relu(s_e - sigmoid(g_e))) must pass the gradient straight through the sign (gold: a custom
# autograd.Function with identity backward, so d relu(...) reaches w_e and g_e); torch.sign has zero gradient, so the
# expert vectors and thresholds never learn from the task loss.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'active_TE = _SignStraightThrough.apply(margin_TE) * torch.zeros_like(margin_TE).scatter_(-1, kept_TK, 1.0)' \
  'active_TE = torch.sign(margin_TE) * torch.zeros_like(margin_TE).scatter_(-1, kept_TK, 1.0)'
