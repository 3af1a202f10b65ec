#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on megatron-lm, which must FAIL: a token routed only to zero-computation experts gets
# no output at all (its zero/copy/constant share is zeroed).
# Why: the zero, copy and constant experts' output is the token's (the instruction: y is their share, which every
# token's output must include). gpu1's top-6 of 64 never routes a token to them alone; the branch run (top-1) does.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/megatron-lm/moe-plus-plus.patch" \
  $'        self.moepp_routed_logits = routed_logits\n' \
  $'        self.moepp_routed_logits = routed_logits\n        output = output * (routed_logits.topk(top_k, dim=-1).indices < self.num_ffn_experts).any(-1, keepdim=True)\n'
