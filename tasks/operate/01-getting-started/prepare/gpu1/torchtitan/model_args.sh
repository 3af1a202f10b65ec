# The gpu1 profile for torchtitan 0.3.0: its DeepSeek-V3 16B config (DeepSeek-V2-Lite's shape) cut to 4 layers, on the
# shipped corpus, sequence 2048, batch 8, one GPU. Not run here.
MODEL_ARGS=(--module deepseek_v3 --config deepseek_v3_16b --model.n_layers 4 --hf_assets_path data/tokenizer
  --dataloader.dataset c4_test --dataloader.dataset_path data/corpus.jsonl
  --training.seq_len 2048 --training.local_batch_size 8)
NPROC=1
