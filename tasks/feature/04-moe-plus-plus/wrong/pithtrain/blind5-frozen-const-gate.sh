#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the constant experts' gate W_c is registered with requires_grad=False, so it never trains.
# Why: the instruction asks for learnable W_c passed itself, with gradients reaching it; an agent copying the 'fixed' zero/copy experts' spirit, or freezing a new matrix while debugging, leaves it frozen; loss still falls.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'self.moepp_const_gate = nn.Parameter(torch.empty(MOEPP_CONSTANT, 2, D))' \
  'self.moepp_const_gate = nn.Parameter(torch.empty(MOEPP_CONSTANT, 2, D), requires_grad=False)'
