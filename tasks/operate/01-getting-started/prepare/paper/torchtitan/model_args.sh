# The paper profile for torchtitan 0.3.0: DeepSeek-V2-Lite's shape (its deepseek_v3_16b config), PP4 x EP2 on 8 GPUs,
# sequence 2048, global batch 1024, as the paper ran it. Not runnable on this project's machines.
MODEL_ARGS=(--module deepseek_v3 --config deepseek_v3_16b --hf_assets_path data/tokenizer
  --parallelism.pipeline_parallel_degree 4 --parallelism.expert_parallel_degree 2
  --training.seq_len 2048 --training.global_batch_size 1024 --training.local_batch_size 8)
NPROC=8
