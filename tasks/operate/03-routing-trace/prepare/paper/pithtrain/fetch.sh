#!/usr/bin/env bash
# Collect Routing Trace, paper profile: download the released DeepSeek-V2-Lite (checkpoint/, with its tokenizer) and
# one DCLM shard as data/dclm-shard.jsonl (needs the network and a Hugging Face login).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p checkpoint data
huggingface-cli download deepseek-ai/DeepSeek-V2-Lite --local-dir checkpoint
shard=global-shard_01_of_10/local-shard_0_of_10/shard_00000000_processed.jsonl.zst
huggingface-cli download mlfoundations/dclm-baseline-1.0 "$shard" --repo-type dataset --local-dir data/dclm
zstd -dc "data/dclm/$shard" >data/dclm-shard.jsonl
