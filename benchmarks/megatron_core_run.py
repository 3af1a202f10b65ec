"""Throughput baseline "megatron-core + torch kernels": one benchmark run of megatron-core 0.19.2 on a Qwen3-MoE shape.

    torchrun --standalone --nproc-per-node N benchmarks/megatron_core_run.py --spec SPEC.json --metrics OUT.jsonl
    python benchmarks/megatron_core_run.py --spec SPEC.json --metrics OUT.jsonl          # one GPU
    python benchmarks/megatron_core_run.py --spec SPEC.json --device cpu --describe X.json  # CPU build smoke

Method: megatron-core drives everything it owns (GPTModel, TopKRouter, MoEAlltoAllTokenDispatcher, Float16Module,
DistributedDataParallel, the distributed optimizer from get_megatron_optimizer, get_forward_backward_func), built
from its own Transformer-Engine-free layer spec `get_gpt_layer_local_spec`. Only two spec entries are swapped, so
that the baseline runs PyTorch's fast kernels instead of megatron's unfused local fallbacks:
- core_attention: `SDPACoreAttention` (F.scaled_dot_product_attention, causal, GQA) for `DotProductAttention`
  (baddbmm + masked softmax + bmm, which materialises [b, heads, s, s]);
- experts: `GroupedMMExperts` (two torch._grouped_mm calls over all local experts) for `SequentialMLP` (a Python
  loop of one MLP per expert: 2 x E small GEMMs and their launches per layer).
Both keep the 0.19.2 constructor and forward contracts (attention.py `CoreAttentionBuilder`/`CoreAttentionInterface`,
moe_layer.py `ExpertsBuilder`/`ExpertsInterface`) and semantics: the routing probability multiplies the SwiGLU output
before the down projection and the product is cast back to the activation dtype, as SequentialMLP's MLP does.

Qwen3-MoE mapping: softmax router with top-k renormalisation is megatron's post-top-k softmax
(`moe_router_pre_softmax=False`; norm_topk_prob=false maps to pre-softmax), fp32 router, global-batch aux loss
(`global_aux_loss`, pithtrain's default), RMSNorm with per-head qk-norm, RoPE, SwiGLU, no biases, untied embeddings.

Loss: megatron's own fused cross-entropy (`cross_entropy_loss_fusion`, the "native" implementation: jit-fused
fp32 softmax statistics, no Transformer Engine), as Megatron-LM's --cross-entropy-loss-fusion. On the H200 it took
the 1-GPU step from 0.256 to 0.240 s against the unfused vocab_parallel_cross_entropy (NOTES.md).

AdamW: without Transformer Engine or apex, megatron/core/optimizer/__init__.py falls back to `torch.optim.AdamW` and
builds it with lr, weight_decay, betas, eps and capturable only: no OptimizerConfig field reaches torch's `fused`
argument (the one `fused=True` in that file is for HybridDeviceOptimizer, the CPU-offload path), so torch picks its
foreach implementation. `use_fused_adamw` therefore sets `fused=True` on the param groups of the torch AdamW inside
megatron's DistributedOptimizer after construction (torch reads `group["fused"]` at every step). The fp32 main
params, grad copy, clipping and param all-gather stay megatron's.

Balanced routing: 0.19.2 has `moe_router_force_load_balancing` (router.py: replaces the logits with fresh normal
noise, straight-through gradient). It balances in expectation, not exactly: it is not pithtrain's round-robin.

CPU (`--device cpu`) builds but cannot train: megatron-core 0.19.2 needs CUDA for an MoE step. TopKRouter.gating
and RotaryEmbedding.get_emb move CPU tensors to torch.cuda.current_device(); MoEAlltoAllTokenDispatcher.__init__
creates a torch.cuda.Stream; forward_backward_no_pipelining allocates its token count on "cuda"; DDP's grad
buffers are allocated on the current CUDA device; the mixed-precision optimizers accept only torch.cuda tensors.
So CPU mode validates the spec, sets up a gloo world of 1 and megatron's parallel state, and builds the
TransformerConfig, the swapped spec and GPTModel (use_cpu_initialization) with two settings changed because their
constructors allocate on CUDA: the "allgather" dispatcher for "alltoall" (the CUDA stream above) and the micro-batch
"aux_loss" for "global_aux_loss" (TopKRouter.__init__ puts its global token-count buffers on the current CUDA
device). It runs no step, builds no DDP or optimizer, and says so.
"""

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from megatron.core import parallel_state, tensor_parallel
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig, finalize_model_grads
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.module import Float16Module, MegatronModule
from megatron.core.transformer.transformer_config import TransformerConfig
from synthetic import token_rows

REQUIRED_FIELDS = {
    "vocab_size": int, "hidden_size": int, "num_hidden_layers": int, "num_attention_heads": int,
    "num_key_value_heads": int, "head_dim": int, "num_experts": int, "num_experts_per_tok": int,
    "moe_intermediate_size": int, "tie_word_embeddings": bool, "seq_len": int, "sequences_per_gpu": int,
    "ep": int, "warmup_steps": int, "timed_steps": int, "balanced_routing": bool, "seed": int,
}  # fmt: skip
OPTIONAL_FIELDS = {"rms_norm_eps": 1e-6, "rope_theta": 1e6, "norm_topk_prob": True, "aux_loss_coef": 1e-3}


def load_bench_spec(path: str, world_size: int) -> dict:
    """Strict load: every unknown, missing or mistyped field is an error naming the field and what is allowed."""
    with open(path) as f:
        raw = json.load(f)
    if not isinstance(raw, dict):
        raise SystemExit(f"{path}: expected a JSON object of spec fields")
    allowed = sorted([*REQUIRED_FIELDS, *OPTIONAL_FIELDS])
    for key in raw:
        if key not in REQUIRED_FIELDS and key not in OPTIONAL_FIELDS:
            raise SystemExit(f"{path}: unknown field {key!r}; allowed: {', '.join(allowed)}")
    spec = dict(OPTIONAL_FIELDS) | raw
    for key, kind in REQUIRED_FIELDS.items():
        if key not in spec:
            raise SystemExit(f"{path}: missing field {key!r} ({kind.__name__})")
        if type(spec[key]) is not kind:  # bool is an int subclass, so compare types exactly
            raise SystemExit(f"{path}: field {key!r} must be {kind.__name__}, got {spec[key]!r}")
        if kind is int and key != "seed" and spec[key] < (0 if key == "warmup_steps" else 1):
            raise SystemExit(f"{path}: field {key!r} must be >= {0 if key == 'warmup_steps' else 1}")
    for key in ("rms_norm_eps", "rope_theta", "aux_loss_coef"):
        if not isinstance(spec[key], (int, float)) or isinstance(spec[key], bool) or spec[key] < 0:
            raise SystemExit(f"{path}: field {key!r} must be a non-negative number, got {spec[key]!r}")
    if type(spec["norm_topk_prob"]) is not bool:
        raise SystemExit(f"{path}: field 'norm_topk_prob' must be bool")
    if spec["tie_word_embeddings"]:
        raise SystemExit(f"{path}: field 'tie_word_embeddings' must be false (Qwen3-MoE has untied embeddings)")
    if spec["ep"] not in (1, world_size):
        raise SystemExit(f"{path}: field 'ep' must be 1 or the number of processes ({world_size}), got {spec['ep']}")
    if spec["num_experts"] % spec["ep"]:
        raise SystemExit(f"{path}: field 'num_experts' ({spec['num_experts']}) must be divisible by ep ({spec['ep']})")
    if spec["num_attention_heads"] % spec["num_key_value_heads"]:
        raise SystemExit(f"{path}: field 'num_attention_heads' must be a multiple of 'num_key_value_heads'")
    if not 1 <= spec["num_experts_per_tok"] <= spec["num_experts"]:
        raise SystemExit(f"{path}: field 'num_experts_per_tok' must be in [1, num_experts]")
    for key in ("hidden_size", "moe_intermediate_size"):  # torch._grouped_mm needs 16-byte-aligned bf16 rows
        if spec[key] % 8:
            raise SystemExit(f"{path}: field {key!r} must be a multiple of 8 for torch._grouped_mm")
    return spec


class SDPACoreAttention(MegatronModule):
    """Drop-in for 0.19.2 DotProductAttention: [sq, b, np, hn] q and [sk, b, ng, hn] k/v in, [sq, b, np*hn] out."""

    def __init__(
        self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None, softmax_scale=None,
        cp_comm_type=None, pg_collection=None,
    ):  # fmt: skip
        super().__init__(config=config)
        assert config.context_parallel_size == 1 and config.tensor_model_parallel_size == 1
        assert config.softmax_type == "vanilla" and config.window_size is None
        assert not config.apply_query_key_layer_scaling
        assert (config.attention_dropout if attention_dropout is None else attention_dropout) == 0.0
        assert attn_mask_type == AttnMaskType.causal, f"SDPACoreAttention is causal only, got {attn_mask_type}"
        self.layer_number = max(1, layer_number)
        self.attn_mask_type = attn_mask_type
        self.softmax_scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(config.kv_channels)
        self.enable_gqa = config.num_query_groups != config.num_attention_heads

    def forward(
        self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None, packed_seq_params=None
    ):
        # GPTModel passes no mask for causal attention; megatron's local fallback builds the causal mask itself.
        assert attention_mask is None and attention_bias is None and packed_seq_params is None
        assert (attn_mask_type or self.attn_mask_type) == AttnMaskType.causal
        sq, b, np_, hn = query.shape
        q_BHSd, k_BGSd, v_BGSd = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        o_BHSd = F.scaled_dot_product_attention(
            q_BHSd, k_BGSd, v_BGSd, is_causal=True, scale=self.softmax_scale, enable_gqa=self.enable_gqa
        )
        return o_BHSd.permute(2, 0, 1, 3).reshape(sq, b, np_ * hn)


class GroupedMMExperts(MegatronModule):
    """Drop-in for 0.19.2 SequentialMLP/TEGroupedMLP: all local experts' SwiGLU MLPs in two torch._grouped_mm calls.

    Legend: T permuted tokens (grouped by local expert), D hidden, I moe_ffn_hidden_size, E local experts.
    """

    def __init__(self, num_local_experts, config, submodules=None, pg_collection=None, name=None):
        super().__init__(config=config)
        assert config.gated_linear_unit and config.activation_func is F.silu and not config.add_bias_linear
        assert not config.moe_apply_probs_on_input and config.expert_tensor_parallel_size in (None, 1)
        E, D, I = num_local_experts, config.hidden_size, config.moe_ffn_hidden_size
        self.num_local_experts = num_local_experts
        device = "cpu" if config.use_cpu_initialization else torch.cuda.current_device()
        self.gate_up_proj = torch.nn.Parameter(torch.empty(E, 2 * I, D, device=device, dtype=config.params_dtype))
        self.down_proj = torch.nn.Parameter(torch.empty(E, D, I, device=device, dtype=config.params_dtype))
        if config.perform_initialization:
            self._init_weights()
        for weight in (self.gate_up_proj, self.down_proj):
            weight.allreduce = False  # megatron's mark for expert params: DDP reduces them over the expert-DP group

    def _init_weights(self):
        # Same init functions as megatron's expert linears; on GPU under the expert RNG stream so EP ranks differ.
        tracker = tensor_parallel.get_cuda_rng_tracker()
        rng_name = tensor_parallel.random.get_expert_parallel_rng_tracker_name()
        with tracker.fork(rng_name) if self.gate_up_proj.is_cuda else contextlib.nullcontext():
            self.config.init_method(self.gate_up_proj.data)
            self.config.output_layer_init_method(self.down_proj.data)

    def forward(self, permuted_local_hidden_states, tokens_per_expert, permuted_probs):
        x_TD = permuted_local_hidden_states
        offsets_E = torch.cumsum(tokens_per_expert.to(x_TD.device, non_blocking=True), 0).to(torch.int32)
        h_TI2 = torch._grouped_mm(x_TD, self.gate_up_proj.transpose(-2, -1), offs=offsets_E)
        gate_TI, up_TI = h_TI2.chunk(2, dim=-1)  # megatron's glu: first half through the activation
        a_TI = F.silu(gate_TI) * up_TI
        a_TI = (a_TI * permuted_probs.unsqueeze(-1)).to(a_TI.dtype)  # as MLP's per_token_scale, in fp32 then cast
        y_TD = torch._grouped_mm(a_TI, self.down_proj.transpose(-2, -1), offs=offsets_E)
        return y_TD, None

    def backward_dw(self):
        pass  # no delayed weight-gradient computation


def make_layer_spec(num_experts: int):
    """megatron's local (TE-free) GPT layer spec with the core attention and the experts swapped."""
    layer = get_gpt_layer_local_spec(
        num_experts=num_experts, moe_grouped_gemm=False, qk_layernorm=True, normalization="RMSNorm"
    )
    attention = layer.submodules.self_attention
    attention.submodules = dataclasses.replace(attention.submodules, core_attention=SDPACoreAttention)
    moe = layer.submodules.mlp
    assert isinstance(moe, functools.partial), f"0.19.2's local MoE spec is a partial(MoELayer), got {moe!r}"
    moe_submodules = dataclasses.replace(moe.keywords["submodules"], experts=GroupedMMExperts)
    layer.submodules.mlp = functools.partial(moe.func, *moe.args, **(moe.keywords | {"submodules": moe_submodules}))
    return layer


def make_transformer_config(spec: dict, device: str) -> TransformerConfig:
    # CPU build only: these two GPU settings allocate CUDA objects in constructors (module docstring).
    dispatcher, aux_loss = ("alltoall", "global_aux_loss") if device == "cuda" else ("allgather", "aux_loss")
    return TransformerConfig(
        num_layers=spec["num_hidden_layers"], hidden_size=spec["hidden_size"],
        num_attention_heads=spec["num_attention_heads"], num_query_groups=spec["num_key_value_heads"],
        kv_channels=spec["head_dim"], ffn_hidden_size=spec["moe_intermediate_size"],
        normalization="RMSNorm", layernorm_epsilon=spec["rms_norm_eps"], qk_layernorm=True,
        add_bias_linear=False, gated_linear_unit=True, activation_func=F.silu,
        hidden_dropout=0.0, attention_dropout=0.0, init_method_std=0.02,
        bias_activation_fusion=False, masked_softmax_fusion=False, bias_dropout_fusion=False,
        apply_rope_fusion=False, persist_layer_norm=False, gradient_accumulation_fusion=False,
        bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        num_moe_experts=spec["num_experts"], moe_router_topk=spec["num_experts_per_tok"],
        moe_ffn_hidden_size=spec["moe_intermediate_size"], moe_router_score_function="softmax",
        moe_router_pre_softmax=not spec["norm_topk_prob"], moe_router_dtype="fp32",
        moe_router_load_balancing_type=aux_loss, moe_aux_loss_coeff=spec["aux_loss_coef"],
        moe_router_force_load_balancing=spec["balanced_routing"], moe_grouped_gemm=False, moe_permute_fusion=False,
        moe_token_dispatcher_type=dispatcher, cross_entropy_loss_fusion=True, cross_entropy_fusion_impl="native",
        expert_model_parallel_size=spec["ep"], use_cpu_initialization=device == "cpu",
    )  # fmt: skip


def setup_distributed(spec_path: str, device: str) -> tuple[dict, int, int]:
    if "RANK" not in os.environ:  # plain `python`: a world of one
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if device == "cpu" and world != 1:
        raise SystemExit("--device cpu runs a world of 1 only")
    spec = load_bench_spec(spec_path, world)
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo")
    parallel_state.initialize_model_parallel(expert_model_parallel_size=spec["ep"])
    torch.manual_seed(spec["seed"])
    if device == "cuda":
        tensor_parallel.model_parallel_cuda_manual_seed(spec["seed"])
    return spec, rank, world


def use_fused_adamw(optimizer) -> None:
    """Switch megatron's torch.optim.AdamW fallback(s) to torch's fused kernel (see the module docstring)."""
    for megatron_optimizer in getattr(optimizer, "chained_optimizers", [optimizer]):
        torch_adamw = megatron_optimizer.optimizer
        assert type(torch_adamw) is torch.optim.AdamW, f"expected megatron's torch AdamW fallback, got {torch_adamw}"
        for group in torch_adamw.param_groups:
            group["fused"], group["foreach"] = True, False
        torch_adamw.defaults.update(fused=True, foreach=False)


def make_ddp_config() -> DistributedDataParallelConfig:
    # Grads accumulate and reduce in fp32 (megatron's --accumulate-allreduce-grads-in-fp32), no overlap tricks.
    return DistributedDataParallelConfig(
        grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=True, check_for_nan_in_grad=False
    )


def make_optimizer_config() -> OptimizerConfig:
    # "adam" with decoupled_weight_decay (default True) is AdamW; norms get no weight decay (megatron's default).
    return OptimizerConfig(
        optimizer="adam", lr=3e-4, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, clip_grad=1.0,
        min_lr=3e-4, bf16=True, params_dtype=torch.bfloat16, use_distributed_optimizer=True,
    )  # fmt: skip


def make_model_and_optimizer(spec: dict, device: str):
    config = make_transformer_config(spec, device)
    gpt = GPTModel(
        config=config, transformer_layer_spec=make_layer_spec(spec["num_experts"]), vocab_size=spec["vocab_size"],
        max_sequence_length=spec["seq_len"], pre_process=True, post_process=True,
        share_embeddings_and_output_weights=False, position_embedding_type="rope", rotary_base=int(spec["rope_theta"]),
    )  # fmt: skip
    model = Float16Module(config, gpt)  # bf16 compute; fp32 main params live in the distributed optimizer
    if device == "cpu":
        return config, model, (None, None)
    model = DistributedDataParallel(config=config, ddp_config=make_ddp_config(), module=model)
    optimizer = get_megatron_optimizer(make_optimizer_config(), [model])
    use_fused_adamw(optimizer)
    # Constant lr; the scheduler is what applies megatron's wd_mult=0 to norms (param groups only carry the mult).
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=3e-4, max_lr=3e-4, min_lr=3e-4, lr_warmup_steps=0, lr_decay_steps=1,
        lr_decay_style="constant", start_wd=0.1, end_wd=0.1, wd_incr_steps=1, wd_incr_style="constant",
    )  # fmt: skip
    config.no_sync_func = model.no_sync
    config.finalize_model_grads_func = finalize_model_grads
    return config, model, (optimizer, scheduler)


def describe_build(model, optimizer) -> dict:
    """Class names of what was actually built, for tests and for the benchmark record."""
    layer = model.module.module.decoder.layers[0] if optimizer else model.module.decoder.layers[0]
    inner = [o.optimizer for o in getattr(optimizer, "chained_optimizers", [optimizer])] if optimizer else []
    return {
        "core_attention": type(layer.self_attention.core_attention).__name__,
        "experts": type(layer.mlp.experts).__name__,
        "router": type(layer.mlp.router).__name__,
        "token_dispatcher": type(layer.mlp.token_dispatcher).__name__,
        "model_wrapper": type(model).__name__,
        "optimizer": type(optimizer).__name__ if optimizer else None,
        "inner_optimizers": [f"{type(o).__name__}(fused={o.param_groups[0]['fused']})" for o in inner],
        "forward_backward_func": get_forward_backward_func().__name__,
    }


def make_batches(spec: dict, device: str, dp_rank: int):
    """Every step's micro-batch of uniformly random token ids, generated before the first step
    (benchmarks/synthetic.py, as for the other sides), a different stream per data-parallel rank; each is
    moved to the device when the schedule asks for it, as the other trainers do."""
    steps, batch, seq = spec["warmup_steps"] + spec["timed_steps"], spec["sequences_per_gpu"], spec["seq_len"]
    rows = token_rows(spec["vocab_size"], steps * batch, seq, spec["seed"] * 1000 + dp_rank).view(steps, batch, -1)
    inputs, labels = rows[..., :-1].contiguous(), rows[..., 1:].contiguous()
    position_ids = torch.arange(seq, device=device).expand(batch, -1)
    for step_inputs, step_labels in zip(inputs, labels):
        yield {"input_ids": step_inputs.to(device), "labels": step_labels.to(device), "position_ids": position_ids}


def forward_step(data_iterator, model):
    batch = next(data_iterator)
    loss_BS = model(batch["input_ids"], batch["position_ids"], None, labels=batch["labels"])

    def loss_func(loss_BS):
        loss = loss_BS.float().mean()
        return loss, {"lm loss": loss.detach()}

    return loss_BS, loss_func


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Fields of SPEC.json: " + ", ".join(
        [*REQUIRED_FIELDS, *(f"{k} (default {v})" for k, v in OPTIONAL_FIELDS.items())]))  # fmt: skip
    parser.add_argument("--spec", required=True, help="JSON file: model shape (Qwen3-MoE field names) and run")
    parser.add_argument("--metrics", help="JSONL written by rank 0: one line per step (step, step_time_s, loss, ...)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: build-only smoke, no steps")
    parser.add_argument("--describe", help="JSON written by rank 0: class names of the built pieces")
    args = parser.parse_args(argv)

    spec, rank, world = setup_distributed(args.spec, args.device)
    config, model, (optimizer, scheduler) = make_model_and_optimizer(spec, args.device)
    description = describe_build(model, optimizer)
    if rank == 0:
        print(f"[megatron_core_run] world {world}, ep {spec['ep']}: {json.dumps(description)}", flush=True)
        if args.describe:
            with open(args.describe, "w") as f:
                json.dump(description, f, indent=1)
    if args.device == "cpu":
        print("[megatron_core_run] CPU smoke: built only; megatron-core 0.19.2 needs CUDA to run an MoE step "
              "(router, RoPE, alltoall dispatcher, schedule, DDP buffers, optimizer)", flush=True)  # fmt: skip
        torch.distributed.destroy_process_group()
        return 0

    batches = make_batches(spec, args.device, parallel_state.get_data_parallel_rank())
    forward_backward = get_forward_backward_func()
    metrics = open(args.metrics, "w") if args.metrics and rank == 0 else None
    # The step's time is the wall time between the ends of two steps, each end after the loss has been reduced
    # over the data-parallel ranks and read back to the host (as pithtrain's and TorchTitan's log lines are).
    last = time.perf_counter()
    for step in range(1, spec["warmup_steps"] + spec["timed_steps"] + 1):
        # Clear grads (megatron's contiguous grad buffers and the optimizer's views of them).
        model.zero_grad_buffer()
        optimizer.zero_grad()
        # One micro-batch forward and backward, then finalize_model_grads (DP/EP reduce-scatter).
        losses = forward_backward(
            forward_step_func=forward_step, data_iterator=batches, model=[model], num_microbatches=1,
            seq_length=spec["seq_len"], micro_batch_size=spec["sequences_per_gpu"], forward_only=False,
        )  # fmt: skip
        # fp32 main-param AdamW step with clipping, then the bf16 param all-gather.
        update_successful, grad_norm, _ = optimizer.step()
        scheduler.step(increment=1)
        loss = losses[0]["lm loss"].clone()
        torch.distributed.all_reduce(loss, group=parallel_state.get_data_parallel_group())
        loss = loss.item() / parallel_state.get_data_parallel_world_size()
        now = time.perf_counter()
        step_time_s, last = now - last, now
        assert update_successful, "bf16 without a loss scaler never skips a step"
        max_mem_gib = torch.cuda.max_memory_allocated() / 2**30
        if metrics:
            record = {"step": step, "step_time_s": step_time_s, "loss": loss, "max_mem_gib": max_mem_gib}
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
        if rank == 0:
            print(f"step {step}: {step_time_s:.3f} s, loss {loss:.4f}, grad norm {grad_norm:.3f}, "
                  f"max mem {max_mem_gib:.2f} GiB", flush=True)  # fmt: skip
    if metrics:
        metrics.close()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
