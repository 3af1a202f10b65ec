# The paper profile on Megatron-LM (read by verify.sh and train.sh), as the paper ran it: DeepSeek-V2-Lite (27
# layers, the first dense; 64 routed experts top-6, 2 shared), PP4 x EP2 on 8 GPUs, sequence 2048, micro-batch 1,
# global batch 1024, BF16, Adam (no weight decay) at a constant 1e-4, the sequence-level load-balancing loss at 1e-2;
# the embedding counts as a layer in the pipeline split (27 + 1 = 7 per stage).
# Expected in the workspace: pretrain_gpt.py (git-only), data/tokenizer (DeepSeek-V2-Lite's tokenizer files) and
# data/dclm_text_document.{bin,idx} (the DCLM shard through Megatron-LM's tools/preprocess_data.py with that
# tokenizer). Not runnable on this project's machines (8 GPUs).
MODEL_ARGS=(--num-layers 27 --hidden-size 2048 --ffn-hidden-size 10944 --num-attention-heads 16
  --multi-latent-attention --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128
  --num-experts 64 --moe-router-topk 6 --moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 2816
  --moe-layer-freq "[0]*1+[1]*26" --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-2
  --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split
  --expert-model-parallel-size 2
  --seq-length 2048 --max-position-embeddings 163840 --micro-batch-size 1 --global-batch-size 1024
  --optimizer adam --weight-decay 0 --lr 1e-4 --lr-decay-style constant --bf16 --seed 1234
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --attention-dropout 0 --hidden-dropout 0
  --untie-embeddings-and-output-weights --tokenizer-type HuggingFaceTokenizer --tokenizer-model data/tokenizer
  --data-path data/dclm_text_document --split 100,0,0)
