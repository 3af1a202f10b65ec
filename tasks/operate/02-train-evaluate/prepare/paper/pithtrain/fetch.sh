#!/usr/bin/env bash
# Train & Evaluate, paper profile: download what the paper's run read (needs the network and a Hugging Face login):
# one DCLM shard as data/dclm-shard.jsonl and the DeepSeek-V2 tokenizer in data/tokenizer/.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p data/tokenizer
huggingface-cli download deepseek-ai/DeepSeek-V2-Lite tokenizer.json tokenizer_config.json --local-dir data/tokenizer
shard=global-shard_01_of_10/local-shard_0_of_10/shard_00000000_processed.jsonl.zst
huggingface-cli download mlfoundations/dclm-baseline-1.0 "$shard" --repo-type dataset --local-dir data/dclm
zstd -dc "data/dclm/$shard" >data/dclm-shard.jsonl
