"""Gold for Collect Routing Trace on megatron-lm, the conversion: the provided Hugging Face DeepSeek-V2 checkpoint to a
Megatron-LM checkpoint in its torch format, for `--load DIR --finetune --ckpt-format torch` (model weights only; the run
starts at step 0 with a fresh optimizer).

    python hf_to_megatron.py --hf checkpoint --num-layers 4 --output artifacts/megatron-init

Writes DIR/release/mp_rank_00/model_optim_rng.pt (tensors and numbers only, so torch.load's weights_only default reads
it) and DIR/latest_checkpointed_iteration.txt saying `release`. Names map as mlm_hf.py says; Megatron loads it with
strict=True but falls back to a non-strict load on any error, so every name and shape is checked here first.
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlm_hf import hf_to_megatron, read_hf  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hf", type=Path, required=True, help="Hugging Face directory: config.json and *.safetensors")
    p.add_argument("--num-layers", type=int, required=True)
    p.add_argument("--output", type=Path, required=True)
    args = p.parse_args()
    config = json.loads((args.hf / "config.json").read_text())
    if config["num_hidden_layers"] != args.num_layers:
        raise SystemExit(f"{args.hf} has {config['num_hidden_layers']} layers, not {args.num_layers}")
    if config.get("q_lora_rank") or config.get("scoring_func", "softmax") != "softmax" or config.get("norm_topk_prob"):
        raise SystemExit("only MLA without a query LoRA and softmax routing without renormalisation is written")
    state = hf_to_megatron(read_hf(args.hf), args.num_layers)
    dense = config["first_k_dense_replace"]
    routers = [k for k in state if k.endswith("mlp.router.weight")]
    if len(routers) != args.num_layers - dense:
        raise SystemExit(f"{len(routers)} MoE layers, the config says {args.num_layers - dense}")
    out = args.output / "release" / "mp_rank_00"
    out.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state, "checkpoint_version": 3.0, "iteration": 0}, out / "model_optim_rng.pt")
    (args.output / "latest_checkpointed_iteration.txt").write_text("release")
    print(f"wrote {len(state)} entries to {out / 'model_optim_rng.pt'}")


if __name__ == "__main__":
    main()
