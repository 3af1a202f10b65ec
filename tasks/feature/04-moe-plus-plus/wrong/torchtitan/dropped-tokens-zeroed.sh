#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on torchtitan, which must FAIL: a token routed only to zero-computation experts gets
# no output at all (its zero/copy/constant share is zeroed).
# Why: the zero, copy and constant experts' output is the token's (the instruction: y is their share, which every
# token's output must include). Smoke's top-2 of 8 (4 of them zero-computation) routes tokens to them alone; gpu1's
# top-6 of 64 never does, and there the branch run (top-1) catches it.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moe-plus-plus.patch" \
  $'            self.moepp_routed_logits = routed_logits\n' \
  $'            self.moepp_routed_logits = routed_logits\n            moepp_out = moepp_out * (routed_logits.topk(top_k, dim=-1).indices < num_ffn_experts).any(-1, keepdim=True)\n'
