#!/usr/bin/env bash
# Near miss for 04-moe-plus-plus on torchtitan, which must FAIL: the four zero-computation experts are added on top of
# the flavor's routed experts (8 FFN + 4 = 12 experts in smoke) instead of taken out of them (4 FFN + 4).
# Why: in the smoke profile the model keeps its expert count and the 1 zero + 1 copy + 2 constant experts are taken
# out of it (gold: 8 router logits, 4 grouped experts); here the router and W_g are 12 wide.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/torchtitan/moe-plus-plus.patch" \
  $'        self.moe_args.moepp = job_config.model.moepp\n' \
  $'        self.moe_args.moepp = job_config.model.moepp\n        if self.moe_args.moepp:\n            self.moe_args.num_experts += MOEPP_ZERO_COMPUTATION\n'
