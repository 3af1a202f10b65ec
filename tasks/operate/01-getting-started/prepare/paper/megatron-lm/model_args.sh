# The paper profile for Megatron-LM: DeepSeek-V2-Lite (27 layers, the first dense; 64 routed experts top-6, 2 shared),
# PP4 x EP2 on 8 GPUs (the embedding counts as a layer in the split: 7 per stage), sequence 2048, global batch 1024,
# BF16, no dropout (DeepSeek-V2 has none), as the paper ran it. Not runnable on this project's machines.
MODEL_ARGS=(--num-layers 27 --hidden-size 2048 --ffn-hidden-size 10944 --num-attention-heads 16 --kv-lora-rank 512
  --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 64 --moe-router-topk 6
  --moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 2816 --moe-layer-freq "[0]*1+[1]*26"
  --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split
  --expert-model-parallel-size 2 --seq-length 2048 --max-position-embeddings 163840
  --micro-batch-size 1 --global-batch-size 1024 --lr 3e-4 --bf16
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --attention-dropout 0 --hidden-dropout 0
  --untie-embeddings-and-output-weights --multi-latent-attention --moe-router-load-balancing-type seq_aux_loss
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer)
NPROC=8
