#!/usr/bin/env bash
# Near miss for 03-diff-attention on pithtrain, which must FAIL: the lambda vectors get the model's default N(0, 0.02^2) init instead of N(0, 0.1^2).
# Why: the paper initialises the four lambda vectors from N(0, 0.1^2); an agent that sets the init in __init__ misses that reset_parameters re-draws every parameter with initializer_range.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/diff-attention.patch" \
  $'            elif name.rsplit(".", 1)[-1].startswith("lambda_"):  # Differential Transformer: N(0, 0.1^2)\n                g = torch.Generator(device=p.device).manual_seed(base + zlib.crc32(name.encode()))\n                p.normal_(0.0, 0.1, generator=g)\n' \
  ''
