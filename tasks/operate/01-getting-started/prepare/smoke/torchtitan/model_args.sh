# The smoke profile for torchtitan 0.3.0: its DeepSeek-V3 debug model (MLA, MoE) on the shipped corpus and tokenizer,
# sequence 64, batch 8, on the CPU. Not run here: torchtitan 0.3.0 cannot start on a CPU (see task.toml).
MODEL_ARGS=(--module deepseek_v3 --config deepseek_v3_debugmodel --hf_assets_path data/tokenizer
  --dataloader.dataset c4_test --dataloader.dataset_path data/corpus.jsonl
  --training.seq_len 64 --training.local_batch_size 8)
NPROC=1
