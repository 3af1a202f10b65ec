#!/usr/bin/env bash
# Near miss for 01-moba on pithtrain, which must FAIL: the model uses MoBA only in eval mode; training with model.moba=true still runs dense causal attention.
# Why: The switch must route the model's attention through moba_attention whenever model.moba is on, also in training;
# here training silently keeps dense SDPA and MoBA only runs in eval.
exec python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/moba.patch" \
  $'        if self.moba:\n            if distributed.cp_size > 1:' \
  $'        if self.moba and not self.training:\n            if distributed.cp_size > 1:'
