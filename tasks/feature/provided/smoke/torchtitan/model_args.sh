# The smoke profile on torchtitan 0.3.0 (read by verify.sh and train.sh): its DeepSeek-V3 debug model (MLA, 8 routed
# experts and 2 shared, vocabulary 2048) on the corpus and tokenizer shipped in data/ (CPython's language reference,
# a 2,048-token BPE), sequence 128, batch 4, seed 1234, a loss line every step. torchtitan 0.3.0 does not start on a
# CPU (task.toml says what was observed), so this profile is listed but not run for torchtitan.
MODEL_ARGS=(--module deepseek_v3 --config deepseek_v3_debugmodel --hf_assets_path data/tokenizer
  --dataloader.dataset c4_test --dataloader.dataset_path data/corpus
  --training.seq_len 128 --training.local_batch_size 4 --debug.seed 1234 --metrics.log_freq 1)
