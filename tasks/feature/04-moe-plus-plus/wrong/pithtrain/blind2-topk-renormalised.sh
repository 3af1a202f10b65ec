#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on pithtrain, which must FAIL: the top-k probabilities are renormalised to sum to 1 (in the op and in the model's FFN weights).
# Why: instruction: softmax over all experts, the top-k experts by probability, each weighted by its probability (not renormalised).
# Revision 5 named the FFN weights' function (moepp_ffn_weights): the same mistake, made on what it returns.
set -euo pipefail
python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  'topk_w_TK, topk_ids_TK = routed_TE.softmax(-1).topk(top_k, dim=-1)
' \
  'topk_w_TK, topk_ids_TK = routed_TE.softmax(-1).topk(top_k, dim=-1)
    topk_w_TK = topk_w_TK / topk_w_TK.sum(-1, keepdim=True)
'
python3 - <<'PY'
from pathlib import Path
p = Path('pithtrain/models/deepseek_v2.py')
t = p.read_text()
assert t.count("topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)  # the op's own choice, recomputed\n") == 1
p.write_text(t.replace("topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)  # the op's own choice, recomputed\n", "topk_w_TK, topk_ids_TK = moepp_ffn_weights(routed_TE, K)  # the op's own choice, recomputed\n        topk_w_TK = topk_w_TK / topk_w_TK.sum(-1, keepdim=True)\n"))
PY
