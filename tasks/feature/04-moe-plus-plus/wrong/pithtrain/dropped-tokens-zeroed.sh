#!/usr/bin/env bash
# Wrong solution for 04-moe-plus-plus on pithtrain, which must FAIL: the gold with one rule broken (a token routed only to zero-computation experts gets no output at all).
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moe-plus-plus.patch" \
  $'        self.moepp_routed_TE = routed_TE\n' \
  $'        self.moepp_routed_TE = routed_TE\n        self.moepp_zero_out_TD = self.moepp_zero_out_TD * (routed_TE.topk(K, -1).indices < F_).any(-1, keepdim=True)\n'
