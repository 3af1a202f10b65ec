#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: each layer's lambda_init is written onto the decoder layer, not its attention, so every layer keeps layer 1's 0.2.
# Why: lambda_init must depend on the layer's depth; setting the attribute on the wrong module is a silent no-op that still trains.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  'layer.self_attn.lambda_init = ' \
  'layer.lambda_init = '
