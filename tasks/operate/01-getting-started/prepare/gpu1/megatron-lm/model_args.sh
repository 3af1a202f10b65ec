# The gpu1 profile for Megatron-LM: DeepSeek-V2-Lite's shape cut to 4 layers (1 dense, 3 MoE of 64 routed experts,
# top-6, 2 shared), sequence 2048, batch 8, BF16, one GPU. As released: MLA without a query LoRA and with the latent
# kv norm (--qk-layernorm), YaRN RoPE (factor 40 from 4096, mscale 0.707), softmax routing over all experts then top-6,
# not renormalised (--moe-router-pre-softmax), RMSNorm eps 1e-6, no dropout (Megatron's default is 0.1 on attention
# and hidden states; a step's routing could not be recomputed), and its 102400-token embedding (the shipped
# tokenizer's 2048 tokens padded to 102400). The machine has neither Transformer Engine nor Apex: Megatron-Core's own
# modules (--transformer-impl local) and no fused kernels of theirs; mla_local_spec.py (--spec) is the local spec with a
# core attention that takes MLA's head sizes (at this pin the local one cannot build MLA). No evaluation passes
# (Megatron's default would run 100 validation and 100 test iterations after training); the interval only has to be
# set, since counting the run's samples divides by it.
MODEL_ARGS=(--num-layers 4 --hidden-size 2048 --ffn-hidden-size 10944 --num-attention-heads 16 --kv-lora-rank 512
  --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 64 --moe-router-topk 6
  --moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 2816 --moe-layer-freq "[0]*1+[1]*3"
  --seq-length 2048 --max-position-embeddings 163840 --micro-batch-size 2 --global-batch-size 8 --lr 3e-4 --bf16
  --position-embedding-type rope --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear
  --attention-dropout 0 --hidden-dropout 0
  --untie-embeddings-and-output-weights --multi-latent-attention --qk-layernorm --rope-type yarn
  --rotary-scaling-factor 40 --mscale 0.707 --mscale-all-dim 0.707 --moe-router-pre-softmax
  --moe-router-load-balancing-type seq_aux_loss
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer --make-vocab-size-divisible-by 102400
  --transformer-impl local --no-persist-layer-norm --no-gradient-accumulation-fusion --no-masked-softmax-fusion
  --no-rope-fusion --no-bias-swiglu-fusion --no-bias-dropout-fusion --attention-softmax-in-fp32
  --spec mla_local_spec block_spec --eval-iters 0 --eval-interval 1000)
NPROC=1
