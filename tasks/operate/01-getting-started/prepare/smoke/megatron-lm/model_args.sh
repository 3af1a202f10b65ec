# The smoke profile for Megatron-LM: the operate tasks' tiny DeepSeek-V2 (1 dense layer, then 2 MoE layers of 8 routed
# experts, top-2, 1 shared expert; MLA), sequence 64, batch 8. Not runnable here: megatron-core's MoE step needs CUDA.
# No dropout, as DeepSeek-V2 (Megatron defaults to 0.1).
MODEL_ARGS=(--num-layers 3 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 2 --kv-lora-rank 16
  --qk-head-dim 16 --qk-pos-emb-head-dim 8 --v-head-dim 16 --num-experts 8 --moe-router-topk 2
  --moe-ffn-hidden-size 32 --moe-shared-expert-intermediate-size 32 --moe-layer-freq "[0]*1+[1]*2"
  --seq-length 64 --max-position-embeddings 256 --micro-batch-size 4 --global-batch-size 8 --lr 3e-3
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --attention-dropout 0 --hidden-dropout 0
  --untie-embeddings-and-output-weights --multi-latent-attention --moe-router-load-balancing-type seq_aux_loss
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer)
NPROC=1
