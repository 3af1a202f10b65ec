# The smoke profile on Megatron-LM (read by verify.sh and train.sh): a tiny DeepSeek-V2-style model (MLA; one dense
# layer, then MoE layers of 8 routed experts top-2 and a shared expert), as pithtrain's feature-smoke.toml, sequence
# 128, batch 4, seed 1234. Expected in the workspace: pretrain_gpt.py (git-only) and data/tiny_text_document.{bin,idx}
# made from the shipped data/corpus.jsonl by Megatron-LM's tools/preprocess_data.py --tokenizer-type
# HuggingFaceTokenizer --tokenizer-model data/tokenizer --append-eod. megatron-core's MoE step needs CUDA, so this
# profile is listed but not run for megatron-lm.
MODEL_ARGS=(--num-layers 4 --hidden-size 128 --ffn-hidden-size 256 --num-attention-heads 4
  --multi-latent-attention --kv-lora-rank 32 --qk-head-dim 32 --qk-pos-emb-head-dim 16 --v-head-dim 32
  --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 64 --moe-shared-expert-intermediate-size 64
  --moe-layer-freq "[0]*1+[1]*3" --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-3
  --seq-length 128 --max-position-embeddings 256 --micro-batch-size 4 --global-batch-size 4
  --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 3 --lr-decay-style cosine --seed 1234
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --untie-embeddings-and-output-weights --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer
  --data-path data/tiny_text_document --split 100,0,0)
