"""Gold for Train & Evaluate on torchtitan, the export: a TorchTitan DeepSeek-V3-model checkpoint (DCP, model only)
to a Hugging Face DeepseekV2ForCausalLM directory, with the tokenizer's files beside the weights.

    python export_hf.py --checkpoint artifacts/checkpoint/step-25 --flavor deepseek_v2_lite_4l --seq-len 2048 \
        --tokenizer data/tokenizer --output artifacts/hf-export

TorchTitan 0.2.2 renames its weights to Hugging Face's with its own DeepSeekV3StateDictAdapter but ships no offline
converter and no config.json writer, so this script writes both. The flavor is read from the provided module
(experimental.custom_import, on PYTHONPATH). RoPE in the config is what TorchTitan computed at this sequence length:
it applies YaRN only beyond original_seq_len, and Hugging Face's yarn would apply it at every length.
"""

import argparse
import json
import shutil
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import save_file
from torchtitan.models.deepseek_v3 import deepseekv3_args
from torchtitan.models.deepseek_v3.model.state_dict_adapter import DeepSeekV3StateDictAdapter


def hf_config(a, seq_len: int) -> dict:
    if seq_len > a.original_seq_len:
        raise SystemExit(f"--seq-len {seq_len} > original_seq_len {a.original_seq_len}: YaRN export not written")
    m = a.moe_args
    return {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "vocab_size": a.vocab_size,
        "hidden_size": a.dim,
        "intermediate_size": a.inter_dim,
        "moe_intermediate_size": a.moe_inter_dim,
        "num_hidden_layers": a.n_layers,
        "first_k_dense_replace": a.n_dense_layers,
        "moe_layer_freq": 1,
        "num_attention_heads": a.n_heads,
        "num_key_value_heads": a.n_heads,
        "q_lora_rank": a.q_lora_rank or None,
        "kv_lora_rank": a.kv_lora_rank,
        "qk_nope_head_dim": a.qk_nope_head_dim,
        "qk_rope_head_dim": a.qk_rope_head_dim,
        "v_head_dim": a.v_head_dim,
        "n_routed_experts": m.num_experts,
        "n_shared_experts": m.num_shared_experts,
        "num_experts_per_tok": m.top_k,
        "scoring_func": m.score_func,
        "topk_method": "greedy",
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": m.route_norm,
        "routed_scaling_factor": m.route_scale,
        "rms_norm_eps": a.norm_eps,
        "max_position_embeddings": seq_len,
        "rope_theta": a.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": a.rope_theta},
        "hidden_act": "silu",
        "attention_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--flavor", required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    args = p.parse_args()
    __import__(args.flavor)  # registers the flavor, as experimental.custom_import does
    model_args = deepseekv3_args[args.flavor]
    meta = dcp.FileSystemReader(str(args.checkpoint)).read_metadata().state_dict_metadata
    state = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in meta.items()}
    dcp.load(state, checkpoint_id=str(args.checkpoint))
    hf_state = DeepSeekV3StateDictAdapter(model_args, None).to_hf(state)
    hf_state = {k: v.to(torch.bfloat16).contiguous() for k, v in hf_state.items()}
    args.output.mkdir(parents=True, exist_ok=True)
    save_file(hf_state, args.output / "model.safetensors", metadata={"format": "pt"})
    (args.output / "config.json").write_text(json.dumps(hf_config(model_args, args.seq_len), indent=1))
    for f in args.tokenizer.iterdir():
        shutil.copy(f, args.output / f.name)
    print(f"exported {len(hf_state)} tensors to {args.output}")


if __name__ == "__main__":
    main()
