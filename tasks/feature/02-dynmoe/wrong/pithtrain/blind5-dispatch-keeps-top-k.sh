#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the model dispatches only num_experts_per_tok (2) slots per token from the gate's weights, instead of up to k_max, so tokens with more active experts lose some of their 1/k weights.
# Why: tokens now use a variable number of experts up to k_max; reusing the existing fixed top-K dispatch width is the easiest way to plug the gate into the EP path, and it still trains.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'w_TE.topk(min(cfg.dynmoe_k_max, cfg.n_routed_experts), dim=-1)' \
  'w_TE.topk(cfg.num_experts_per_tok, dim=-1)'
