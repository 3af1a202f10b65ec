#!/usr/bin/env bash
# Gold for Train & Evaluate on pithtrain: tokenize the provided corpus, train 25 steps (train.sh), export the final
# checkpoint to Hugging Face format with the tokenizer, run the provided evaluate.sh on the export.
set -euo pipefail
case "$ATE_PROFILE" in
  smoke | gpu1) CORPUS=data/corpus.jsonl; export NPROC=1 ;;
  paper) bash fetch.sh; CORPUS=data/dclm-shard.jsonl; export NPROC=8 ;;
  *) echo "unknown ATE_PROFILE '$ATE_PROFILE'" >&2; exit 2 ;;
esac
python -m pithtrain tokenize "$CORPUS" --tokenizer data/tokenizer --output artifacts/tokens
cp "$GOLD_DIR/train.sh" train.sh
bash train.sh
python -m pithtrain convert pithtrain-to-hf --source artifacts/checkpoint --output artifacts/hf-export \
  --tokenizer data/tokenizer
bash evaluate.sh artifacts/hf-export
