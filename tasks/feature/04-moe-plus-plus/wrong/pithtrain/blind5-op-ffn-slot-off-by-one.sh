#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: moepp_expert_mix counts id F (the zero expert) as an FFN slot (<= F instead of < F), adding ffn_out[F-1] for tokens routed to the zero expert.
# Why: an off-by-one at the FFN/zero-computation boundary: FFN experts are ids 0..F-1 and the zero expert must output 0; the model passes zeros for ffn_out, so training hides it, but the op's contract (ffn_out = every FFN expert's output) does not.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'ffn_slot_TK = topk_ids_TK < F_\n    picked_TKD' \
  $'ffn_slot_TK = topk_ids_TK <= F_\n    picked_TKD'
