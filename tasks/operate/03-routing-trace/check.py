"""Collect Routing Trace: four well-formed per-step traces that are the model's real routing.

Schema (any framework): `artifacts/routing-traces/step-00000001.npz` .. `step-00000004.npz` load with
numpy.load (no pickles), `expert_ids` int32 and `gate_weights` float32 of shape (MoE layers, global batch,
sequence, top_k) from the provided config; ids in [0, experts), distinct per token; weights finite, in
[0, 1], summing to 1 within SUM_TOL per token; step 2's routing differs from step 1's (new data).

Real routing (pithtrain): step 1's forward runs on the provided weights (no update has happened yet), so
the checker rebuilds step 1's batch from the provided config and data with this repository's pithtrain
(never the agent's edited copy), runs the model up to the first MoE layer's router, and requires the same
expert set for at least AGREE of the tokens and matching weights on those; a random trace agrees on about
1 / C(experts, top_k) of the tokens. It runs the run's micro-batches, so that on a GPU bf16 rounds as in the run.
On gpu1 the weights are the workspace's `checkpoint/`, written by the provided make_checkpoint.py (too large to
ship); without them the routing is not recomputed, a FAIL. On torchtitan the checker does the same with the pinned
torchtitan of its own environment: the provided flavor (operate_check.TORCHTITAN_PROVIDED: smoke and gpu1; paper
FAILs as not written) loads the weights through TorchTitan's state-dict adapter, and step 1's batch is the first
local batch of TorchTitan's text dataset over the provided corpus/ and tokenizer (its loader neither shuffles nor
accumulates gradients in the provided config).
On megatron-lm, step 1's batch is rebuilt with the pinned Megatron-LM (operate_check.pinned_megatron: the harness's
copy, never the workspace's): the provided corpus tokenized by Megatron's own tokenizer as tools/preprocess_data.py
does (with and without --append-eod), its GPTDataset over it with the provided model_args.sh's arguments (--split
100,0,0, 4 x global batch samples, the default seed) and its C++ helpers; that equals what pretrain_gpt.py's own
dataset provider builds from preprocess_data.py's output (checked on the CPU). The first MoE layer's router logits
are recomputed in fp32 with transformers' DeepseekV2 on the provided weights, and the bf16 run must agree on the
tokens whose 6th and 7th choices are clear of rounding (MLM_MARGIN), not on every token.
"""

import json
import logging
import sys
import tomllib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import operate_check as oc

REPO = Path(__file__).resolve().parents[3]
STEPS = 4
SUM_TOL = 1e-3
AGREE = 0.98
WEIGHT_TOL = {"smoke": 1e-4, "gpu1": 2e-2, "paper": 2e-2}
"""Max |weight| difference on agreeing tokens: fp32 on CPU; bf16 autocast on GPUs."""


def load_traces(ws: Path, shape: tuple, n_experts: int, failures: list[str]) -> list[tuple] | None:
    traces = []
    for step in range(1, STEPS + 1):
        path = ws / "artifacts" / "routing-traces" / f"step-{step:08d}.npz"
        try:
            with np.load(path, allow_pickle=False) as f:
                ids, w = f["expert_ids"], f["gate_weights"]
        except Exception as e:  # missing file, not an npz, missing key, pickled object: the agent's FAIL
            why = f"{type(e).__name__}: {e}"
            failures.append(f"{path.relative_to(ws)} does not load with expert_ids and gate_weights ({why})")
            return None
        name = path.name
        expected = (("expert_ids", ids, np.int32), ("gate_weights", w, np.float32))
        bad = [f"{k} is {a.dtype} {a.shape}, expected {t.__name__} {shape}" for k, a, t in expected]
        bad = [b for b, (_, a, t) in zip(bad, expected) if a.dtype != t or a.shape != shape]
        if bad:
            failures.append(f"{name}: {'; '.join(bad)}")
            return None
        if ids.min() < 0 or ids.max() >= n_experts:
            failures.append(f"{name}: expert ids outside [0, {n_experts})")
        if (np.sort(ids, -1)[..., 1:] == np.sort(ids, -1)[..., :-1]).any():
            failures.append(f"{name}: a token lists the same expert twice")
        if not np.isfinite(w).all() or w.min() < 0 or w.max() > 1:
            failures.append(f"{name}: gate weights outside [0, 1] or not finite")
        elif np.abs(w.sum(-1) - 1).max() > SUM_TOL:
            failures.append(
                f"{name}: gate weights sum to {w.sum(-1).min():.4f}..{w.sum(-1).max():.4f} per token, not 1"
            )
        traces.append((ids, w))
    if np.array_equal(traces[0][0], traces[1][0]):
        failures.append("step 2's expert ids equal step 1's: each step routes a new batch")
    return traces


def first_layer_routing(ws: Path, config: Path, checkpoint: Path):
    """Step 1's routing of the first MoE layer, recomputed: (ids, renormalised weights), each (B, S, K)."""
    import torch

    sys.path.insert(0, str(REPO))
    from pithtrain.models import model_family
    from pithtrain.modules.data import ResumableSampler, get_batch, make_dataset
    from pithtrain.tasks.convert_checkpoint import read_hf_weights
    from pithtrain.tasks.pretrain_lm import load_pretrain_cfg

    cfg = load_pretrain_cfg(str(config))
    tc, family = cfg.training, model_family(cfg.model.family)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # the seeded init of a 2.25B model is slow on the CPU
        model = family.model_class(cfg.model)
    model.load_state_dict(
        family.state_dict_from_hf({k: v.float() for k, v in read_hf_weights(checkpoint).items()}, cfg.model)
    )
    model.to(device).eval()
    dataset = make_dataset(cfg.data, cfg.model.vocab_size, tc.seed)  # data.path is relative to the workspace (cwd)
    ids_BS, _ = get_batch(dataset, ResumableSampler(len(dataset), tc.seed, shuffle=True), 0, tc.global_batch_size)
    autocast = device == "cuda" and tc.precision != "fp32"
    ids, weights = [], []
    for mb_BS in ids_BS.to(device).split(tc.micro_batch_size):  # the run's shapes, so bf16 rounds the same way
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            cos, sin = model.rope(mb_BS)
            h = model.model.embed_tokens(mb_BS)
            for layer in model.model.layers.values():
                if layer.is_moe:
                    _, _, topk_ids_TK, topk_w_TK = layer.forward_stage1(h, cos, sin)
                    break
                h = layer(h, cos, sin)
        w = topk_w_TK.float()
        ids.append(topk_ids_TK.view(*mb_BS.shape, -1).cpu())
        weights.append((w / w.sum(-1, keepdim=True)).view(*mb_BS.shape, -1).cpu())
    return torch.cat(ids).numpy(), torch.cat(weights).numpy()


def torchtitan_first_layer_routing(task_dir: Path, profile: str, checkpoint: Path):
    """Step 1's first-MoE-layer routing as TorchTitan computes it: (ids, renormalised weights), each (B, S, K)."""
    import torch
    from safetensors.torch import load_file
    from torchtitan.components.tokenizer import HuggingFaceTokenizer
    from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataset
    from torchtitan.models.deepseek_v3 import DeepSeekV3Model
    from torchtitan.models.deepseek_v3.model.state_dict_adapter import DeepSeekV3StateDictAdapter

    oc.torchtitan_cpu_histc()
    args, job = oc.torchtitan_flavor(task_dir, profile)
    provided = task_dir / "prepare" / profile / "torchtitan"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = DeepSeekV3Model(args)
    hf = {k: v.float() for f in sorted(checkpoint.glob("*.safetensors")) for k, v in load_file(f).items()}
    model.load_state_dict(DeepSeekV3StateDictAdapter(args, None).from_hf(hf))
    model.eval()
    tokenizer = HuggingFaceTokenizer(str(provided / "data" / "tokenizer"))
    dataset = HuggingFaceTextDataset("c4_test", str(provided / "corpus"), tokenizer, seq_len=job["seq_len"])
    samples = iter(dataset)
    ids_BS = torch.stack([next(samples)[0]["input"] for _ in range(job["local_batch_size"])]).to(device)
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
        h = model.tok_embeddings(ids_BS)
        for layer in model.layers.values():
            if layer.moe_enabled:
                h = h + layer.attention(layer.attention_norm(h), model.freqs_cis, None)
                top_w, top_ids, _ = layer.moe.router(layer.ffn_norm(h).flatten(0, 1), layer.moe.expert_bias)
                break
            h = layer(h, model.freqs_cis, None)
    w = top_w.float()
    shape = (*ids_BS.shape, -1)
    return top_ids.view(shape).cpu().numpy(), (w / w.sum(-1, keepdim=True)).view(shape).cpu().numpy()


def megatron_step1_batches(task_dir: Path, profile: str, data: Path) -> dict[str, np.ndarray] | str:
    """Step 1's batch (global batch x sequence token ids, the data loader's order) of the provided model_args.sh run on
    the provided corpus, as Megatron-LM builds it, with the pinned Megatron-LM (never the workspace's): its own argument
    defaults, tokenizer and GPTDataset (--split 100,0,0, train_iters x global batch samples, --seed's default), over
    the corpus tokenized here as tools/preprocess_data.py does, once with --append-eod and once without (the agent's
    choice; both are Megatron's documented ways). Its pretraining sampler hands out samples 0, 1, ... in order.
    Or the one-line reason it cannot be built."""
    import subprocess
    import tempfile

    pinned = oc.pinned_megatron()
    if isinstance(pinned, str):
        return pinned
    failure = oc.megatron_dataset_helpers(pinned)
    if failure:
        return failure
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer
    from megatron.training.arguments import parse_args

    logging.getLogger("megatron").setLevel(logging.WARNING)  # its INFO lines would land among the verdict's
    script = oc.provided(task_dir, profile, "megatron-lm", "model_args.sh")
    listed = subprocess.run(
        ["bash", "-c", 'source "$0" && printf "%s\\0" "${MODEL_ARGS[@]}"', str(script)], capture_output=True, check=True
    )
    tmp = Path(tempfile.mkdtemp(prefix="megatron-step1-"))
    argv = [*listed.stdout.decode().split("\0")[:-1], "--data-path", str(tmp / "x"), "--split", "100,0,0"]
    argv += ["--train-iters", str(STEPS), "--tokenizer-model", str(data / "tokenizer")]
    saved_argv, sys.argv = sys.argv, ["pretrain_gpt.py", *argv]
    try:
        args = parse_args()
    finally:
        sys.argv = saved_argv
    tokenizer = build_tokenizer(args)
    docs = [tokenizer.tokenize(json.loads(line)["text"]) for line in (data / "corpus.jsonl").open() if line.strip()]
    batches = {}
    for eod in (True, False):
        prefix = str(tmp / ("corpus-eod" if eod else "corpus"))
        builder = IndexedDatasetBuilder(prefix + ".bin", dtype=DType.optimal_dtype(tokenizer.vocab_size))
        for ids in (d for d in docs if d):
            ids = [*ids, tokenizer.eod] if eod else ids
            builder.add_document(ids, [len(ids)])
        builder.finalize(prefix + ".idx")
        config = GPTDatasetConfig(
            random_seed=args.seed,
            sequence_length=args.seq_length,
            blend=([prefix], None),
            split=args.split,
            path_to_cache=str(tmp / "cache"),
            mmap_bin_files=args.mmap_bin_files,
            tokenizer=tokenizer,
            reset_position_ids=args.reset_position_ids,
            reset_attention_mask=args.reset_attention_mask,
            eod_mask_loss=args.eod_mask_loss,
            create_attention_mask=args.create_attention_mask_in_dataloader,
            mid_level_dataset_surplus=args.mid_level_dataset_surplus,
            allow_ambiguous_pad_tokens=args.allow_ambiguous_pad_tokens,
        )
        samples = [args.train_iters * args.global_batch_size, 0, 0]  # training.get_train_valid_test_num_samples
        train = BlendedMegatronDatasetBuilder(GPTDataset, samples, lambda: True, config).build()[0]
        batch = [train[i]["tokens"].numpy() for i in range(args.global_batch_size)]
        batches["with --append-eod" if eod else "without --append-eod"] = np.stack(batch)
    return batches


def hf_first_moe_router(config: Path, checkpoint: Path, ids_BS: np.ndarray) -> np.ndarray | str:
    """The first MoE layer's router logits (B, S, experts) in fp32 on ids, or why the weights do not load:
    transformers' DeepseekV2 of the provided config cut after that layer, on the provided weights; the router's input is
    what reaches that layer's MLP."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(config)
    first = cfg.first_k_dense_replace
    cfg.num_hidden_layers = first + 1  # the later layers' weights are left unread
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, info = AutoModelForCausalLM.from_pretrained(
        checkpoint, config=cfg, dtype=torch.float32, output_loading_info=True
    )
    if info["missing_keys"]:
        return f"{checkpoint} lacks {sorted(info['missing_keys'])[:4]}"
    model.to(device).eval()
    moe, taken = model.model.layers[first].mlp, []

    class Reached(Exception):
        pass

    def take(_module, inputs):
        taken.append((inputs[0].float() @ moe.gate.weight.float().T).cpu())
        raise Reached  # the experts and the layers after are not needed

    hook = moe.register_forward_pre_hook(take)
    try:
        for sequence in torch.from_numpy(ids_BS).to(device).split(1):
            try:
                with torch.no_grad():
                    model(sequence)
            except Reached:
                pass
    finally:
        hook.remove()
    return torch.cat(taken).numpy()


MLM_MARGIN = 0.15
"""Megatron-LM: a token whose recomputed (fp32) 6th and 7th router logits are this many of its logits' standard
deviations apart must be routed to the same expert set. The run is bf16 in Megatron's own modules and the recompute
fp32 in transformers', so a near tie may flip: on the CPU, a tiny copy of the gpu1 model (hidden 64, 16 experts top-6)
run by Megatron-LM itself on step 1's batch picked the recompute's set for 100% of tokens in fp32 and 93.9% in bf16,
every miss at a gap under 0.074 deviations; at the gpu1 shape itself (its layers 0-1, transformers in bf16 autocast
vs fp32, two sequences of the batch) 93.8% agreed, every miss under 0.046, and 19% of tokens were clear of 0.15. The
margin is twice the largest miss seen. A random or reordered trace matches under 1% of the clear tokens."""
MLM_CLEAR = 0.1
"""The check is made on at least this share of step 1's tokens (1638 of gpu1's 16384), or FAILs as not made."""


def margin_failures(trace_ids, trace_w, logits, k: int, tol: float) -> list[str]:
    """agreement_failures on the tokens whose recomputed k-th and (k+1)-th router logits are MLM_MARGIN deviations
    apart; the recomputed weights are Megatron's pre-softmax routing (softmax over all experts, then top-k),
    renormalised."""
    order = np.argsort(-logits, -1)
    z = np.take_along_axis(logits, order, -1)
    clear = z[..., k - 1] - z[..., k] > MLM_MARGIN * logits.std(-1)
    if clear.mean() < MLM_CLEAR:
        return [f"checker: only {clear.mean():.0%} of tokens have a clear top-{k}: the routing check cannot be made"]
    p = np.exp(logits - logits.max(-1, keepdims=True))
    want_ids = order[..., :k]
    want_w = np.take_along_axis(p, want_ids, -1)
    want_w = want_w / want_w.sum(-1, keepdims=True)
    return agreement_failures(trace_ids[clear], trace_w[clear], want_ids[clear], want_w[clear].astype(np.float32), tol)


def agreement_failures(trace_ids, trace_w, want_ids, want_w, tol: float) -> list[str]:
    order_t, order_w = np.argsort(trace_ids, -1), np.argsort(want_ids, -1)
    ids_t, ids_w = np.take_along_axis(trace_ids, order_t, -1), np.take_along_axis(want_ids, order_w, -1)
    same = (ids_t == ids_w).all(-1)
    share = float(same.mean())
    if share < AGREE:
        return [
            f"step 1's first MoE layer: the trace picks the recomputed experts for {share:.1%} of tokens "
            f"(need {AGREE:.0%}): not the model's routing"
        ]
    diff = np.abs(np.take_along_axis(trace_w, order_t, -1) - np.take_along_axis(want_w, order_w, -1))[same].max()
    if diff > tol:
        return [
            f"step 1's first MoE layer: gate weights differ from the recomputed ones by up to {diff:.2e} "
            f"(allowed {tol:.0e})"
        ]
    return []


def megatron_failures(task_dir: Path, profile: str, checkpoint: Path, step1, m: dict, tol: float) -> list[str]:
    """Step 1's trace against the recompute on the batch of either tokenization: one of them must agree."""
    data = oc.provided(task_dir, profile, "megatron-lm", "data")
    batches = megatron_step1_batches(task_dir, profile, data)
    if isinstance(batches, str):
        return [batches]
    config = oc.provided(task_dir, profile, "pithtrain", "checkpoint")
    tried = {}
    for name, ids_BS in batches.items():
        logits = hf_first_moe_router(config, checkpoint, ids_BS)
        if isinstance(logits, str):
            return [logits]
        tried[name] = margin_failures(step1[0][0], step1[1][0], logits, m["num_experts_per_tok"], tol)
        if not tried[name]:
            return []
    return [f"{name}: {why}" for name, reasons in tried.items() for why in reasons]


def main() -> int:
    args = oc.parse_args()
    ws, failures = args.workspace, []
    task_dir = Path(__file__).resolve().parent
    # The profile's shape and run, as pithtrain's provided config states them (the same on every framework).
    config = oc.provided(task_dir, args.profile, "pithtrain", "routing.toml")
    cfg = tomllib.loads(config.read_text())
    m, t = cfg["model"], cfg["training"]
    shape = (m["num_hidden_layers"] - m["first_k_dense_replace"], t["global_batch_size"], cfg["data"]["seq_len"])
    shape += (m["num_experts_per_tok"],)
    traces = load_traces(ws, shape, m["n_routed_experts"], failures)
    checkpoint = oc.provided(task_dir, args.profile, "pithtrain", "checkpoint")
    if not any(checkpoint.glob("*.safetensors")):  # gpu1: make_checkpoint.py wrote the weights in the workspace
        checkpoint = ws / "checkpoint"
    if traces is not None and not any(checkpoint.glob("*.safetensors")):  # the recompute would end in a traceback
        failures.append(
            "checkpoint/ holds no *.safetensors weights (the provided make_checkpoint.py or fetch.sh writes them): "
            "the routing cannot be recomputed"
        )
    elif traces is not None and args.framework == "pithtrain":
        want_ids, want_w = first_layer_routing(ws, config, checkpoint)
        failures += agreement_failures(traces[0][0][0], traces[0][1][0], want_ids, want_w, WEIGHT_TOL[args.profile])
    elif traces is not None and args.framework == "torchtitan" and args.profile in oc.TORCHTITAN_PROVIDED:
        want_ids, want_w = torchtitan_first_layer_routing(task_dir, args.profile, checkpoint)
        failures += agreement_failures(traces[0][0][0], traces[0][1][0], want_ids, want_w, WEIGHT_TOL[args.profile])
    elif traces is not None and args.framework == "megatron-lm":
        failures += megatron_failures(task_dir, args.profile, checkpoint, traces[0], m, WEIGHT_TOL[args.profile])
    elif traces is not None:  # never a PASS on a condition it cannot check
        failures.append(f"checker: recomputing {args.framework}'s routing is not written")
    return oc.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
