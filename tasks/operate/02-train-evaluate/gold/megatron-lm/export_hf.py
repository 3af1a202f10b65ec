"""Gold for Train & Evaluate on megatron-lm, the export: a Megatron-LM checkpoint in its torch format (model only) to a
Hugging Face DeepseekV2ForCausalLM directory, with the tokenizer's files beside the weights.

    python export_hf.py --checkpoint artifacts/checkpoint --tokenizer data/tokenizer --output artifacts/hf-export

Megatron-LM ships no exporter for this model: the names map as mlm_hf.py says, and config.json is written from the
arguments saved in the checkpoint. RoPE is YaRN as Megatron's MLA applies it at every length (factor, mscale and
mscale_all_dim from the run, original length 4096 and beta 32/1 as MLATransformerConfig's defaults), which is what
Hugging Face's yarn computes from the same parameters (the provided DeepSeek-V2 checkpoint's config states them alike).
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlm_hf import megatron_to_hf  # noqa: E402

MLA_DEFAULTS = {"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0}
"""MLATransformerConfig's values for what Megatron-LM's arguments do not set."""


def checkpoint_file(directory: Path) -> Path:
    tracker = (directory / "latest_checkpointed_iteration.txt").read_text().strip()
    step = "release" if tracker == "release" else f"iter_{int(tracker):07d}"
    return directory / step / "mp_rank_00" / "model_optim_rng.pt"


def expect(args, **wanted) -> None:
    wrong = {k: (getattr(args, k, None), v) for k, v in wanted.items() if getattr(args, k, None) != v}
    if wrong:
        raise SystemExit(f"the checkpoint's run is not the model this export writes (saved, expected): {wrong}")


def hf_config(a) -> dict:
    expect(
        a,
        multi_latent_attention=True,
        q_lora_rank=None,
        qk_layernorm=True,
        swiglu=True,
        normalization="RMSNorm",
        untie_embeddings_and_output_weights=True,
        add_bias_linear=False,
        moe_router_pre_softmax=True,
        moe_router_score_function="softmax",
        moe_router_num_groups=None,
        moe_router_enable_expert_bias=False,
        rope_type="yarn",
    )
    freq = list(a.moe_layer_freq)
    dense = freq.index(1) if 1 in freq else len(freq)
    if freq != [0] * dense + [1] * (len(freq) - dense):
        raise SystemExit(f"moe_layer_freq {freq}: only dense layers first, then MoE layers, is written")
    return {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "vocab_size": a.padded_vocab_size,
        "hidden_size": a.hidden_size,
        "intermediate_size": a.ffn_hidden_size,
        "moe_intermediate_size": a.moe_ffn_hidden_size,
        "num_hidden_layers": a.num_layers,
        "first_k_dense_replace": dense,
        "moe_layer_freq": 1,
        "num_attention_heads": a.num_attention_heads,
        "num_key_value_heads": a.num_attention_heads,
        "q_lora_rank": None,
        "kv_lora_rank": a.kv_lora_rank,
        "qk_nope_head_dim": a.qk_head_dim,
        "qk_rope_head_dim": a.qk_pos_emb_head_dim,
        "v_head_dim": a.v_head_dim,
        "n_routed_experts": a.num_experts,
        "n_shared_experts": a.moe_shared_expert_intermediate_size // a.moe_ffn_hidden_size,
        "num_experts_per_tok": a.moe_router_topk,
        "scoring_func": "softmax",
        "topk_method": "greedy",
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": a.moe_router_topk_scaling_factor or 1.0,
        "rms_norm_eps": a.layernorm_epsilon,
        "max_position_embeddings": a.max_position_embeddings,
        "rope_theta": float(a.rotary_base),
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": float(a.rotary_base),
            "factor": a.rotary_scaling_factor,
            "original_max_position_embeddings": MLA_DEFAULTS["original_max_position_embeddings"],
            "beta_fast": MLA_DEFAULTS["beta_fast"],
            "beta_slow": MLA_DEFAULTS["beta_slow"],
            "mscale": a.mscale,
            "mscale_all_dim": a.mscale_all_dim,
        },
        "hidden_act": "silu",
        "attention_bias": False,
        "tie_word_embeddings": False,
        "initializer_range": a.init_method_std,
        "torch_dtype": "bfloat16",
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", type=Path, required=True, help="Megatron's --save directory (torch format)")
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    args = p.parse_args()
    path = checkpoint_file(args.checkpoint)
    saved = torch.load(path, map_location="cpu", weights_only=False)  # our own run's file: it pickles its arguments
    run = saved["args"]
    if run.moe_shared_expert_intermediate_size % run.moe_ffn_hidden_size:
        raise SystemExit("the shared experts' size is not a multiple of one expert's")
    config = hf_config(run)
    hf_state = megatron_to_hf(saved["model"], run.num_layers)
    hf_state = {k: v.to(torch.bfloat16).contiguous() for k, v in hf_state.items()}
    args.output.mkdir(parents=True, exist_ok=True)
    save_file(hf_state, args.output / "model.safetensors", metadata={"format": "pt"})
    (args.output / "config.json").write_text(json.dumps(config, indent=1))
    for f in args.tokenizer.iterdir():
        shutil.copy(f, args.output / f.name)
    print(f"exported {path} (iteration {saved.get('iteration')}): {len(hf_state)} tensors to {args.output}")


if __name__ == "__main__":
    main()
