# The paper profile on torchtitan 0.3.0 (read by verify.sh and train.sh): DeepSeek-V2-Lite's shape (its
# deepseek_v3_16b config: 27 layers, the first dense, 64 routed experts top-6 and 2 shared), PP4 x EP2 on 8 GPUs,
# sequence 2048, global batch 1024 (micro-batch 1), constant learning rate (no warm-up, decay to a factor of 1),
# seed 1234. Expected in the workspace: data/tokenizer (DeepSeek-V2-Lite's tokenizer files) and data/dclm (the DCLM
# shard as JSON lines with a "text" field). Where torchtitan 0.3.0 differs from the paper's settings: the optimizer
# is deepseek_v3_16b's AdamW at lr 2.2e-4 (a param_groups list in its config_registry.py, which the command line
# cannot reach: the paper's Adam at 1e-4 needs a config function), and it has no sequence-level load-balancing loss
# (its MoE balances by a bias update, load_balance_coeff). Not runnable on this project's machines (8 GPUs).
MODEL_ARGS=(--module deepseek_v3 --config deepseek_v3_16b --hf_assets_path data/tokenizer
  --dataloader.dataset c4_test --dataloader.dataset_path data/dclm
  --parallelism.pipeline_parallel_degree 4 --parallelism.expert_parallel_degree 2
  --training.seq_len 2048 --training.global_batch_size 1024 --training.local_batch_size 1
  --lr_scheduler.warmup_steps 0 --lr_scheduler.min_lr_factor 1.0 --debug.seed 1234 --metrics.log_freq 1)
