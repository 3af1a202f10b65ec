# The gpu1 profile for Megatron-LM: DeepSeek-V2-Lite's shape cut to 4 layers (1 dense, 3 MoE of 64 routed experts,
# top-6, 2 shared), sequence 2048, batch 8, BF16, one GPU. Not run here.
MODEL_ARGS=(--num-layers 4 --hidden-size 2048 --ffn-hidden-size 10944 --num-attention-heads 16 --kv-lora-rank 512
  --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 64 --moe-router-topk 6
  --moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 2816 --moe-layer-freq "[0]*1+[1]*3"
  --seq-length 2048 --max-position-embeddings 163840 --micro-batch-size 2 --global-batch-size 8 --lr 3e-4 --bf16
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --untie-embeddings-and-output-weights --multi-latent-attention --moe-router-load-balancing-type seq_aux_loss
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer)
NPROC=1
