"""Train & Evaluate: the export is the trained model, trained 25 steps from scratch, and it was evaluated.

Conditions, one FAIL line each:
- `artifacts/tokens/` holds the provided corpus tokenized (pithtrain: an index of as many documents as
  the corpus has lines);
- the newest train log shows steps 1 to 25 with finite losses, the first within FROM_SCRATCH of
  ln(vocab) (what a randomly initialised model scores; a loaded pretrained model starts far lower), and
  its exit-time line;
- `artifacts/checkpoint/` is the step-25 checkpoint of the provided model shape;
- `artifacts/hf-export/` loads with `transformers` and its logits on a fixed batch match the checkpoint's
  (loaded with this repository's pithtrain, not the agent's copy) within LOGIT_TOL (relative RMS); a
  freshly initialised or other model misses by far more;
- the newest evaluate log names `artifacts/hf-export` and prints an accuracy in [0, 1], with its exit-time.
The checkpoint is loaded by the framework's own code, never the agent's copy: pithtrain from this repository,
torchtitan from the checker's environment (the pinned 0.2.2) into its DeepSeek-V3 model at the provided flavor
(the task's flavor module, operate_check.TORCHTITAN_PROVIDED: smoke and gpu1; paper FAILs as not written). On
torchtitan `artifacts/tokens/` holds the corpus as JSON lines (its loader tokenizes as it reads). On megatron-lm the
checkpoint is Megatron's torch format, `artifacts/checkpoint/iter_0000025/mp_rank_00/model_optim_rng.pt`, read with
the classes the pinned Megatron-LM (operate_check.pinned_megatron: the harness's copy, never the workspace's) allows
to unpickle; its run's arguments must be the provided model_args.sh's, and its weights, mapped by the checker's own
table onto transformers' DeepseekV2 at the provided shape (which computes what Megatron's model computes: 4e-7 on a
tiny CPU copy), give the reference logits.
"""

import json
import math
import re
import struct
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import operate_check as oc

REPO = Path(__file__).resolve().parents[3]
STEPS = 25
FROM_SCRATCH = 1.0
"""Step 1's loss must be at least ln(vocab) - this (a random model scores about ln(vocab))."""
LOGIT_TOL = 0.05
"""Root-mean-square of (export - checkpoint) logits over that of the checkpoint's: a bf16 export of the trained
model is within 0.01, a freshly initialised one off by about 1."""
ACCURACY = re.compile(r"^accuracy: (\S+)", re.M)
LM_EVAL_ACC = re.compile(r"^\|\s*hellaswag\s*\|.*?\|\s*acc\s*\|\s*[↑]?\s*\|\s*([0-9.]+)", re.M)


def tokens_failures(ws: Path, framework: str) -> list[str]:
    index = ws / "artifacts" / "tokens" / "index.json"
    if framework == "torchtitan":
        return torchtitan_tokens_failures(ws)
    if framework == "megatron-lm":
        return megatron_tokens_failures(ws)
    if framework != "pithtrain":
        return [] if (ws / "artifacts" / "tokens").is_dir() else ["no tokenized corpus in artifacts/tokens/"]
    try:
        docs = json.loads(index.read_text())["num_documents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"artifacts/tokens/index.json is not a `pithtrain tokenize` index ({e!r})"]
    corpus = ws / "data" / "corpus.jsonl"
    if corpus.is_file():  # smoke and gpu1 provide the corpus; paper's shard is the agent's download
        lines = sum(1 for line in corpus.open() if line.strip())
        if docs != lines:
            return [f"artifacts/tokens holds {docs} documents; data/corpus.jsonl has {lines}: tokenize all of it"]
    return []


def torchtitan_tokens_failures(ws: Path) -> list[str]:
    """TorchTitan's text loader reads JSON lines and tokenizes them itself: every corpus document must be there."""
    docs = 0
    for f in sorted((ws / "artifacts" / "tokens").glob("*.jsonl")):
        try:
            docs += sum(1 for line in f.open() if line.strip() and "text" in json.loads(line))
        except (OSError, ValueError, TypeError) as e:
            return [f"artifacts/tokens/{f.name} is not JSON lines with a 'text' field ({e!r})"]
    corpus = ws / "data" / "corpus.jsonl"
    if not corpus.is_file():  # paper: the shard is the agent's download
        return [] if docs else ["no corpus documents in artifacts/tokens/*.jsonl"]
    lines = sum(1 for line in corpus.open() if line.strip())
    if docs != lines:
        return [f"artifacts/tokens/*.jsonl hold {docs} documents; data/corpus.jsonl has {lines}: put all of it there"]
    return []


def megatron_tokens_failures(ws: Path) -> list[str]:
    """Megatron's indexed dataset (tools/preprocess_data.py: one sequence per JSON line) of the whole corpus: an .idx
    whose header (magic, version, dtype code, sequence count, document count) counts as many sequences as lines."""
    indexes = sorted((ws / "artifacts" / "tokens").glob("*.idx"))
    if not indexes:
        return ["no Megatron indexed dataset (*.idx, *.bin) in artifacts/tokens/"]
    corpus = ws / "data" / "corpus.jsonl"
    if not corpus.is_file():  # paper: the shard is the agent's download
        return []
    lines = sum(1 for line in corpus.open() if line.strip())
    counts = {}
    for idx in indexes:
        head = idx.read_bytes()[:34]
        if head[:9] == b"MMIDIDX\x00\x00" and len(head) == 34 and idx.with_suffix(".bin").is_file():
            counts[idx.name] = struct.unpack("<Q", head[18:26])[0]
    if lines not in counts.values():
        return [f"artifacts/tokens/*.idx hold {counts or 'no readable index'} sequences; data/corpus.jsonl has {lines}"]
    return []


def export_logits(ws: Path, ids, device: str):
    """The HF export's logits on ids, or the reason it does not load."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        hf = AutoModelForCausalLM.from_pretrained(ws / "artifacts" / "hf-export", dtype=torch.float32)
    except Exception as e:  # whatever transformers raises on a bad directory is the agent's FAIL
        return f"artifacts/hf-export does not load with transformers AutoModelForCausalLM ({type(e).__name__}: {e})"
    with torch.no_grad():
        return hf.to(device).eval()(ids.to(device)).logits.float().cpu()


def logits_mismatch(got, want) -> str | None:
    if isinstance(got, str):
        return got
    if got.shape != want.shape:
        return f"the export's logits have shape {tuple(got.shape)}, the checkpoint's {tuple(want.shape)}"
    rel = float((got - want).norm() / want.norm())
    if not rel <= LOGIT_TOL:
        return (
            f"the export's logits differ from the step-{STEPS} checkpoint's by {rel:.3f} (relative RMS, allowed "
            f"{LOGIT_TOL}): it is not the trained model"
        )
    return None


def torchtitan_logits_failure(ws: Path, profile: str) -> str | None:
    """Load artifacts/checkpoint/step-25 into TorchTitan's DeepSeek-V3 model at the provided flavor (experts in fp32,
    not the bf16 grouped matmul) and compare its logits with the export's."""
    checkpoint = ws / "artifacts" / "checkpoint" / f"step-{STEPS}"
    if not (checkpoint / ".metadata").is_file():
        return f"no TorchTitan checkpoint at artifacts/checkpoint/step-{STEPS} (a DCP directory with .metadata)"
    if profile not in oc.TORCHTITAN_PROVIDED:  # never a PASS on a condition it cannot check
        return f"checker: loading a TorchTitan checkpoint of the {profile} profile is not written"
    import dataclasses

    import torch
    import torch.distributed.checkpoint as dcp
    from torchtitan.models.deepseek_v3 import DeepSeekV3Model

    oc.torchtitan_cpu_histc()
    args, _ = oc.torchtitan_flavor(Path(__file__).resolve().parent, profile)
    args.moe_args = dataclasses.replace(args.moe_args, use_grouped_mm=False)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = DeepSeekV3Model(args)
    try:
        dcp.load(model.state_dict(), checkpoint_id=str(checkpoint))
    except Exception as e:  # a checkpoint of another shape or format is the agent's FAIL
        return f"artifacts/checkpoint/step-{STEPS} does not load into the provided flavor ({type(e).__name__}: {e})"
    ids = torch.randint(0, min(2048, args.vocab_size), (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model.eval()(ids.to(device)).float().cpu()
    return logits_mismatch(export_logits(ws, ids, device), want)


# Megatron-Core GPTModel names (local spec) -> Hugging Face DeepseekV2 names, the checker's own table: per layer first.
MLM_LAYER = {
    "input_layernorm.weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "self_attention.linear_q_proj.weight": "self_attn.q_proj.weight",
    "self_attention.linear_kv_down_proj.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "self_attention.kv_layernorm.weight": "self_attn.kv_a_layernorm.weight",
    "self_attention.linear_kv_up_proj.weight": "self_attn.kv_b_proj.weight",
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "mlp.router.weight": "mlp.gate.weight",
    "mlp.linear_fc2.weight": "mlp.down_proj.weight",
    "mlp.shared_experts.linear_fc2.weight": "mlp.shared_experts.down_proj.weight",
}
MLM_TOP = {
    "embedding.word_embeddings.weight": "model.embed_tokens.weight",
    "decoder.final_layernorm.weight": "model.norm.weight",
    "output_layer.weight": "lm_head.weight",
}
MLM_RUN = {
    "multi_latent_attention": True,
    "q_lora_rank": None,
    "qk_layernorm": True,
    "swiglu": True,
    "normalization": "RMSNorm",
    "layernorm_epsilon": 1e-6,
    "untie_embeddings_and_output_weights": True,
    "add_bias_linear": False,
    "rope_type": "yarn",
    "rotary_base": 10000,
    "rotary_scaling_factor": 40.0,
    "mscale": 0.707,
    "mscale_all_dim": 0.707,
    "moe_router_pre_softmax": True,
    "moe_router_score_function": "softmax",
    "moe_router_topk_scaling_factor": None,
    "moe_router_enable_expert_bias": False,
}
"""The run's saved arguments that decide what its forward computes, as the provided model_args.sh sets them (and
Megatron defaults them): the reference below is DeepseekV2 with these."""


def megatron_as_hf(state: dict, n_experts: int) -> dict:
    """A Megatron-Core GPTModel state dict (the local spec; SequentialMLP, TEGroupedMLP or GroupedMLP experts) as
    transformers' DeepseekV2 state dict. A dense fc1 is [gate; up] (Megatron's swiglu is silu(first half) * second
    half), which is also one expert's slice of transformers' fused experts.gate_up_proj (experts x 2 ffn x hidden; its
    down_proj is experts x hidden x ffn); GroupedMLP keeps all experts in weight1, viewed experts x hidden x 2 ffn, and
    weight2, viewed experts x ffn x hidden, inputs on the left."""
    import torch

    out, experts, layer = {}, {}, re.compile(r"decoder\.layers\.(\d+)\.(.+)$")
    expert = re.compile(
        r"mlp\.experts\.(?:local_experts\.(\d+)\.linear_(fc[12])\.weight|linear_(fc[12])\.weight(\d+))$"
    )
    for name, t in state.items():
        name = name.removeprefix("module.")
        if name.endswith("_extra_state") or t is None:
            continue
        if name in MLM_TOP:
            out[MLM_TOP[name]] = t
            continue
        m = layer.match(name)
        if m is None:
            raise KeyError(name)
        hf, rest = f"model.layers.{m[1]}.mlp.experts.", m[2]
        mine = experts.setdefault(hf, {"fc1": {}, "fc2": {}})
        if rest in MLM_LAYER:
            out[f"model.layers.{m[1]}.{MLM_LAYER[rest]}"] = t
        elif rest in ("mlp.linear_fc1.weight", "mlp.shared_experts.linear_fc1.weight"):
            mlp = f"model.layers.{m[1]}.{rest.removesuffix('linear_fc1.weight')}"
            out[mlp + "gate_proj.weight"], out[mlp + "up_proj.weight"] = t.chunk(2, dim=0)
        elif e := expert.match(rest):
            number, fc = (e[1], e[2]) if e[1] is not None else (e[4], e[3])
            mine[fc][int(number)] = t
        elif rest == "mlp.experts.weight1":
            mine["fc1"].update(enumerate(w.T for w in t.view(n_experts, t.shape[0], -1)))
        elif rest == "mlp.experts.weight2":
            mine["fc2"].update(enumerate(w.T for w in t.view(n_experts, -1, t.shape[1])))
        else:
            raise KeyError(name)
    for hf, mine in experts.items():
        for fc, fused in (("fc1", "gate_up_proj"), ("fc2", "down_proj")):
            if mine[fc]:
                if sorted(mine[fc]) != list(range(len(mine[fc]))):
                    raise KeyError(f"{hf}: experts {sorted(mine[fc])}")
                out[hf + fused] = torch.stack([mine[fc][i] for i in range(len(mine[fc]))])
    return {k: v.float() for k, v in out.items()}


def megatron_shape(m: dict) -> dict:
    """The provided shape (pithtrain's model table) as Megatron-LM's arguments name it."""
    dense = m["first_k_dense_replace"]
    return {
        "num_layers": m["num_hidden_layers"],
        "hidden_size": m["hidden_size"],
        "ffn_hidden_size": m["intermediate_size"],
        "num_attention_heads": m["num_attention_heads"],
        "kv_lora_rank": m["kv_lora_rank"],
        "qk_head_dim": m["qk_nope_head_dim"],
        "qk_pos_emb_head_dim": m["qk_rope_head_dim"],
        "v_head_dim": m["v_head_dim"],
        "num_experts": m["n_routed_experts"],
        "moe_router_topk": m["num_experts_per_tok"],
        "moe_ffn_hidden_size": m["moe_intermediate_size"],
        "moe_shared_expert_intermediate_size": m["n_shared_experts"] * m["moe_intermediate_size"],
        "moe_layer_freq": [0] * dense + [1] * (m["num_hidden_layers"] - dense),
        "padded_vocab_size": m["vocab_size"],
    }


def reference_config(m: dict):
    """transformers' DeepseekV2 config of the provided shape computing what MLM_RUN's Megatron run computes: YaRN from
    4096 with beta 32/1 (MLATransformerConfig's defaults, which Megatron-LM's arguments do not set), softmax routing
    over all experts, top-k weights not renormalised, no scaling."""
    from transformers import DeepseekV2Config

    rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": m["rope_factor"], "beta_fast": 32.0,
            "beta_slow": 1.0, "original_max_position_embeddings": m["rope_original_max_position_embeddings"],
            "mscale": MLM_RUN["mscale"], "mscale_all_dim": MLM_RUN["mscale_all_dim"]}  # fmt: skip
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "first_k_dense_replace",
            "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
            "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
            "max_position_embeddings")  # fmt: skip
    return DeepseekV2Config(
        **{k: m[k] for k in keys}, q_lora_rank=None, num_key_value_heads=m["num_attention_heads"], moe_layer_freq=1,
        scoring_func="softmax", topk_method="greedy", n_group=1, topk_group=1, norm_topk_prob=False,
        routed_scaling_factor=1.0, rms_norm_eps=MLM_RUN["layernorm_epsilon"], rope_theta=10000.0, rope_parameters=rope,
        tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
    )  # fmt: skip


def megatron_logits_failure(ws: Path, model_table: dict) -> str | None:
    """Read the step-25 checkpoint (Megatron's torch format) with the pinned Megatron-LM on the path for its pickled
    enums, map it onto transformers' DeepseekV2 at the provided shape with the checker's own table, and compare the
    logits with the export's."""
    import torch
    from transformers import AutoModelForCausalLM

    directory = ws / "artifacts" / "checkpoint"
    try:
        tracker = (directory / "latest_checkpointed_iteration.txt").read_text().strip()
    except OSError:
        return "no artifacts/checkpoint/latest_checkpointed_iteration.txt: no Megatron checkpoint was saved there"
    if tracker != str(STEPS):
        return f"artifacts/checkpoint's latest iteration is {tracker!r}, not {STEPS}"
    path = directory / f"iter_{STEPS:07d}" / "mp_rank_00" / "model_optim_rng.pt"
    pinned = oc.pinned_megatron()
    if isinstance(pinned, str):
        return pinned
    # Tensors and plain data only, with the classes the pinned Megatron-LM registers as safe to unpickle (its enums, the
    # arguments' Namespace, ...), as Megatron itself loads: nothing in the file can run code.
    from megatron.core.safe_globals import register_safe_globals

    register_safe_globals()
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        run, state = saved["args"], saved["model"]
    except Exception as e:  # missing, truncated, another format: the agent's FAIL
        return f"{path.relative_to(ws)} does not load as a Megatron torch-format checkpoint ({type(e).__name__}: {e})"
    if saved.get("iteration") != STEPS:
        return f"{path.relative_to(ws)} is at iteration {saved.get('iteration')}, not {STEPS}"
    wanted = {**MLM_RUN, **megatron_shape(model_table)}
    differ = {k: (getattr(run, k, "unset"), v) for k, v in wanted.items() if getattr(run, k, "unset") != v}
    if differ:
        return f"the checkpoint's run differs from the provided model_args.sh (saved, provided): {differ}"
    try:
        hf_state = megatron_as_hf(state, model_table["n_routed_experts"])
    except (KeyError, RuntimeError) as e:
        return f"the checkpoint holds a tensor the provided model has not: {e}"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # the seeded init of a 2.25B model is slow on the CPU
        reference = AutoModelForCausalLM.from_config(reference_config(model_table), dtype=torch.float32)
    expected = {k: v.shape for k, v in reference.state_dict().items()}
    missing, extra = sorted(expected.keys() - hf_state.keys()), sorted(hf_state.keys() - expected.keys())
    wrong = {k: tuple(v.shape) for k, v in hf_state.items() if k in expected and v.shape != expected[k]}
    if missing or extra or wrong:
        return (
            f"the checkpoint is not the provided model: missing {missing[:4]}, extra {extra[:4]}, "
            f"other shapes {dict(list(wrong.items())[:4])}"
        )
    reference.load_state_dict(hf_state)
    ids = torch.randint(0, min(2048, model_table["vocab_size"]), (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = reference.to(device).eval()(ids.to(device)).logits.float().cpu()
    del reference
    return logits_mismatch(export_logits(ws, ids, device), want)


def logits_failure(ws: Path, model_table: dict) -> str | None:
    """Load the checkpoint with pithtrain and the export with transformers; compare logits on a fixed batch."""
    import torch

    sys.path.insert(0, str(REPO))
    from pithtrain.config import load_dataclass
    from pithtrain.models import model_family
    from pithtrain.modules.checkpoint import load_checkpoint, read_meta

    try:
        meta = read_meta(ws / "artifacts" / "checkpoint")
    except Exception as e:  # any unreadable checkpoint is the agent's FAIL
        return f"artifacts/checkpoint is not a readable pithtrain checkpoint ({e})"
    if meta.get("step") != STEPS:
        return f"artifacts/checkpoint is at step {meta.get('step')}, not {STEPS}"
    differ = {k: (meta["model"].get(k), v) for k, v in model_table.items() if meta["model"].get(k) != v}
    if differ:
        return f"the checkpoint's model differs from the provided shape (checkpoint, provided): {differ}"
    family = model_family(meta["model"]["family"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        ours = family.model_class(load_dataclass(family.cfg_class, meta["model"], prefix="model."))
    load_checkpoint(meta["path"], ours)
    ids = torch.randint(0, min(2048, model_table["vocab_size"]), (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = ours.eval()(ids.to(device)).float().cpu()
    return logits_mismatch(export_logits(ws, ids, device), want)


def evaluate_failures(ws: Path, profile: str, failures: list[str]) -> None:
    text = oc.read_log(ws, "evaluate", failures)
    if text is None:
        return
    pattern = LM_EVAL_ACC if profile == "paper" else ACCURACY
    found = pattern.findall(text)
    try:
        acc = float(found[-1]) if found else None
    except ValueError:
        acc = None
    if acc is None or not 0 <= acc <= 1:
        failures.append("the newest evaluate log prints no accuracy in [0, 1]")
    export = str((ws / "artifacts" / "hf-export").resolve())
    if profile != "paper" and f"model: {export}" not in text:
        failures.append("the newest evaluate log did not evaluate artifacts/hf-export")


def main() -> int:
    args = oc.parse_args()
    ws, failures = args.workspace, []
    # The profile's shape, as pithtrain's provided config states it (the same shape on every framework).
    config = oc.provided(Path(__file__).resolve().parent, args.profile, "pithtrain", "operate.toml")
    model_table = tomllib.loads(config.read_text())["model"]
    failures += tokens_failures(ws, args.framework)
    text = oc.read_log(ws, "train", failures)
    if text is not None:
        losses = oc.step_losses(text, args.framework)
        oc.check_steps(losses, STEPS, "the newest train log", failures)
        floor = math.log(model_table["vocab_size"]) - FROM_SCRATCH
        if 1 in losses and not losses[1] >= floor:
            failures.append(
                f"step 1's loss {losses[1]:.3f} is below ln(vocab) - {FROM_SCRATCH} = {floor:.3f}: "
                "not trained from random initialisation"
            )
    if args.framework == "pithtrain":
        failure = logits_failure(ws, model_table)
        failures += [failure] if failure else []
    elif args.framework == "torchtitan":
        failure = torchtitan_logits_failure(ws, args.profile)
        failures += [failure] if failure else []
    elif args.framework == "megatron-lm":
        failure = megatron_logits_failure(ws, model_table)
        failures += [failure] if failure else []
    evaluate_failures(ws, args.profile, failures)
    return oc.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
