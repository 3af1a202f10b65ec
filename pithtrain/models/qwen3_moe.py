"""Qwen3-MoE (the Qwen3-30B-A3B family), self-contained.

Shape legend: B batch, S sequence, D hidden, H query heads, G key/value heads, Dh head dim,
E experts, K experts per token, I expert FFN width, T tokens (B*S), N routed copies (T*K), V vocab.

Attribute names follow Hugging Face `transformers` (`model.layers.0.mlp.experts.gate_up_proj`), so
checkpoint conversion at the bottom of this file is a rename table plus stacking of experts.
Each decoder layer exposes the pipeline's compute stages: `forward_stage1` (norm, attention, norm,
routing), `forward_stage3` (experts on expert-grouped tokens), `forward_stage5` (weighted combine +
residual). Stages 2 and 4 (dispatch/combine) belong to the caller: on one rank they are the local
permutations of `operators/token_permute.py`. `reference_forward` is the eager per-expert oracle.
"""

import zlib
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
import torch.distributed.nn.functional as dist_fn
import torch.nn.functional as F
from torch import nn

from pithtrain.config import ConfigError, Positive, Range
from pithtrain.contexts import distributed, precision
from pithtrain.modules.expert_parallel import combine, dispatch
from pithtrain.modules.ring_attention import ring_attention
from pithtrain.operators.cross_entropy import linear_cross_entropy
from pithtrain.operators.fp8_linear import fp8_grouped_linear, fp8_linear
from pithtrain.operators.swiglu import swiglu
from pithtrain.operators.weight_cast import cast_weight


@dataclass
class Qwen3MoeCfg:
    family: Literal["qwen3_moe"] = "qwen3_moe"
    """Model family; selects this file."""
    vocab_size: Positive = 151936
    """Number of token ids; every id in the data must be below it."""
    hidden_size: Positive = 2048
    """Width D of the residual stream."""
    num_hidden_layers: Positive = 48
    """Number of decoder layers (all MoE)."""
    num_attention_heads: Positive = 32
    """Query heads H."""
    num_key_value_heads: Positive = 4
    """Key/value heads G (grouped-query attention); must divide the query heads."""
    head_dim: Positive = 128
    """Width of one attention head."""
    num_experts: Positive = 128
    """Routed experts E per layer."""
    num_experts_per_tok: Positive = 8
    """Experts K each token is sent to."""
    moe_intermediate_size: Positive = 768
    """Hidden width I of one expert's SwiGLU MLP."""
    norm_topk_prob: bool = True
    """Renormalise the top-k routing weights to sum to one."""
    rms_norm_eps: Annotated[float, Range(gt=0)] = 1e-6
    """Epsilon added to the mean square inside RMSNorm."""
    rope_theta: Annotated[float, Range(gt=0)] = 1_000_000.0
    """RoPE base frequency."""
    max_position_embeddings: Positive = 40960
    """Longest sequence the model is meant for (recorded in exported configs)."""
    tie_word_embeddings: bool = False
    """Share the input embedding with the output head."""
    aux_loss_type: Literal["global_batch", "sequence", "none"] = "global_batch"
    """Load-balancing loss: over all tokens of the micro-batch, per sequence (averaged), or off."""
    aux_loss_coef: Annotated[float, Range(ge=0)] = 1e-3
    """Weight of the load-balancing loss."""
    initializer_range: Annotated[float, Range(gt=0)] = 0.02
    """Standard deviation of the normal init of every matrix."""
    force_balanced_routing: bool = False
    """Benchmarks only: copy k of token t goes to expert (t*K + k) mod E whatever the router prefers (weights are
    the router's probabilities of those experts), so every expert gets the same load and routing luck cannot
    decide a throughput comparison (TorchTitan's debug.moe_force_load_balance does the same)."""

    def __post_init__(self):
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"model.num_key_value_heads = {self.num_key_value_heads} must divide "
                f"model.num_attention_heads = {self.num_attention_heads}."
            )
        if self.num_experts_per_tok > self.num_experts:
            raise ConfigError(
                f"model.num_experts_per_tok = {self.num_experts_per_tok} must be at most "
                f"model.num_experts = {self.num_experts}."
            )


class Qwen3MoeRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def autocast_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matmuls run in here: autocast's when it is on (ops it does not cover are cast by hand)."""
    on = torch.is_autocast_enabled(x.device.type)
    return torch.get_autocast_dtype(x.device.type) if on else x.dtype


def rope_cos_sin(position_ids_BS: torch.Tensor, head_dim: int, theta: float):
    """cos/sin tables (B, S, Dh) in fp32; the halves are repeated as in `rotate_half` RoPE."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=position_ids_BS.device).float() / head_dim))
    freqs_BSF = position_ids_BS[..., None].float() * inv_freq
    emb_BSDh = torch.cat((freqs_BSF, freqs_BSF), dim=-1)
    return emb_BSDh.cos(), emb_BSDh.sin()


def apply_rope(x_BHSDh: torch.Tensor, cos_BSDh: torch.Tensor, sin_BSDh: torch.Tensor) -> torch.Tensor:
    x1, x2 = x_BHSDh.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    cos, sin = cos_BSDh[:, None].to(x_BHSDh.dtype), sin_BSDh[:, None].to(x_BHSDh.dtype)
    return x_BHSDh * cos + rotated * sin


def project(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """An attention projection: FP8 matmuls under training.precision = "fp8" (operators/fp8_linear.py)."""
    return fp8_linear(x, linear.weight) if precision.fp8 else linear(x)


class Qwen3MoeAttention(nn.Module):
    """Grouped-query attention with per-head RMSNorm on queries and keys (QK-norm), causal SDPA."""

    def __init__(self, cfg: Qwen3MoeCfg):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        self.q_proj = nn.Linear(cfg.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = Qwen3MoeRMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = Qwen3MoeRMSNorm(self.head_dim, cfg.rms_norm_eps)

    def forward(self, x_BSD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, S, _ = x_BSD.shape
        q_BHSDh = self.q_norm(project(self.q_proj, x_BSD).view(B, S, self.num_heads, self.head_dim)).transpose(1, 2)
        k_BGSDh = self.k_norm(project(self.k_proj, x_BSD).view(B, S, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v_BGSDh = project(self.v_proj, x_BSD).view(B, S, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q_BHSDh, k_BGSDh = apply_rope(q_BHSDh, cos, sin), apply_rope(k_BGSDh, cos, sin)
        if distributed.cp_size > 1:  # this rank holds a zigzag shard of each sequence
            o_BHSDh = ring_attention(q_BHSDh, k_BGSDh, v_BGSDh, distributed.cp_group)
        else:
            o_BHSDh = F.scaled_dot_product_attention(q_BHSDh, k_BGSDh, v_BGSDh, is_causal=True, enable_gqa=True)
        return project(self.o_proj, o_BHSDh.transpose(1, 2).reshape(B, S, self.num_heads * self.head_dim))


def attention_reference(attn: Qwen3MoeAttention, x_BSD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """`Qwen3MoeAttention.forward` written out (one rank, no FP8): QK-norm, RoPE on the two halves, key/value heads
    repeated, softmax over causally masked scores (fp32), for the layer's `reference_forward`."""
    B, S, _ = x_BSD.shape
    H, G, Dh = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q_BSHDh = attn.q_norm(F.linear(x_BSD, attn.q_proj.weight).view(B, S, H, Dh))
    k_BSGDh = attn.k_norm(F.linear(x_BSD, attn.k_proj.weight).view(B, S, G, Dh))
    v_BSGDh = F.linear(x_BSD, attn.v_proj.weight).view(B, S, G, Dh)

    def rotate(t_BSXDh):
        c, s = cos[:, :, None].to(t_BSXDh.dtype), sin[:, :, None].to(t_BSXDh.dtype)
        return t_BSXDh * c + torch.cat((-t_BSXDh[..., Dh // 2 :], t_BSXDh[..., : Dh // 2]), -1) * s

    q_BSHDh, k_BSHDh = rotate(q_BSHDh), rotate(k_BSGDh).repeat_interleave(H // G, dim=2)
    scores_BHSS = torch.einsum("bqhd,bkhd->bhqk", q_BSHDh, k_BSHDh).float() * Dh**-0.5
    causal_SS = torch.ones(S, S, dtype=torch.bool, device=x_BSD.device).tril()
    probs_BHSS = scores_BHSS.masked_fill(~causal_SS, float("-inf")).softmax(-1)
    v_BSHDh = v_BSGDh.repeat_interleave(H // G, dim=2)
    o_BSHDh = torch.einsum("bhqk,bkhd->bqhd", probs_BHSS.to(v_BSHDh.dtype), v_BSHDh)
    return F.linear(o_BSHDh.reshape(B, S, H * Dh), attn.o_proj.weight)


class Qwen3MoeExperts(nn.Module):
    """This rank's SwiGLU experts as stacked weights (dim 0 = local expert; under expert parallelism,
    rank r holds global experts r*E/EP ... (r+1)*E/EP - 1); `forward` runs them with two grouped matmuls."""

    def __init__(self, cfg: Qwen3MoeCfg):
        super().__init__()
        E, D, I = cfg.num_experts // distributed.ep_size, cfg.hidden_size, cfg.moe_intermediate_size
        self.expert_offset = distributed.ep_rank * E
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * I, D))
        self.down_proj = nn.Parameter(torch.empty(E, D, I))

    def forward(self, x_ND: torch.Tensor, tokens_per_expert_E: torch.Tensor) -> torch.Tensor:
        """x_ND holds the routed copies sorted by expert; tokens_per_expert_E gives each expert's slice."""
        offsets_E = torch.cumsum(tokens_per_expert_E, 0).to(torch.int32)
        if precision.fp8:  # operators/fp8_linear.py
            h_NI = swiglu(fp8_grouped_linear(x_ND, self.gate_up_proj, offsets_E))
            return fp8_grouped_linear(h_NI, self.down_proj, offsets_E)
        x_ND = x_ND.to(autocast_dtype(x_ND))  # autocast does not cover grouped matmuls
        gate_up_N2I = torch._grouped_mm(
            x_ND, cast_weight(self.gate_up_proj, x_ND.dtype).transpose(-2, -1), offs=offsets_E
        )
        h_NI = swiglu(gate_up_N2I)  # silu(gate) * up, one fused kernel on GPU
        return torch._grouped_mm(h_NI, cast_weight(self.down_proj, h_NI.dtype).transpose(-2, -1), offs=offsets_E)

    def reference_forward(self, x_TD: torch.Tensor, topk_ids_TK: torch.Tensor) -> torch.Tensor:
        """Per-expert loop (the test oracle, one rank): y_TKD, each token's output from each chosen expert."""
        assert distributed.ep_size == 1, "the per-expert loop needs every expert on this rank"
        T, K = topk_ids_TK.shape
        y_TKD = x_TD.new_zeros(T, K, x_TD.shape[-1])
        for e in range(self.gate_up_proj.shape[0]):
            token_idx, k_idx = torch.where(topk_ids_TK == e)
            gate, up = F.linear(x_TD[token_idx], self.gate_up_proj[e].to(x_TD.dtype)).chunk(2, dim=-1)
            y_TKD[token_idx, k_idx] = F.linear(F.silu(gate) * up, self.down_proj[e].to(x_TD.dtype)).to(y_TKD.dtype)
        return y_TKD


class AttachAuxLoss(torch.autograd.Function):
    """Identity on x whose backward also sends gradient 1 into `aux_loss`, so the load-balancing loss
    trains the router without being threaded through the pipeline to the final loss."""

    @staticmethod
    def forward(ctx, x, aux_loss):
        ctx.aux_shape, ctx.aux_dtype = aux_loss.shape, aux_loss.dtype
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_x):
        return grad_x, torch.ones(ctx.aux_shape, dtype=ctx.aux_dtype, device=grad_x.device)


def load_balancing_loss(probs_BSE: torch.Tensor, topk_ids_BSK: torch.Tensor, kind: str) -> torch.Tensor:
    """Switch-style loss E * sum_e f_e * P_e (1.0 when perfectly balanced), where f_e is the fraction of
    routed copies sent to expert e and P_e the mean router probability of e. `global_batch` pools every
    token of the micro-batch; `sequence` computes it per sequence and averages (DeepSeek-V3, eq. 17-20).
    Under context parallelism the sums run over the whole sequence (all CP ranks); every CP rank then
    holds the same value and back-propagates 1/CP of it, since the all-reduce's backward sums them."""
    B, S, E = probs_BSE.shape
    if kind == "global_batch":
        probs_BSE, topk_ids_BSK = probs_BSE.reshape(1, B * S, E), topk_ids_BSK.reshape(1, B * S, -1)
    counts_BE = torch.zeros(probs_BSE.shape[0], E, device=probs_BSE.device)
    counts_BE.scatter_add_(1, topk_ids_BSK.flatten(1), torch.ones_like(topk_ids_BSK.flatten(1), dtype=torch.float))
    prob_sums_BE = probs_BSE.sum(1)
    tokens = probs_BSE.shape[1] * distributed.cp_size
    if distributed.cp_size > 1:
        # Same value, 1/CP of the gradient: the all-reduce's backward adds up CP identical gradients.
        prob_sums_BE = prob_sums_BE / distributed.cp_size + prob_sums_BE.detach() * (1 - 1 / distributed.cp_size)
        prob_sums_BE = dist_fn.all_reduce(prob_sums_BE, group=distributed.cp_group)
        torch.distributed.all_reduce(counts_BE, group=distributed.cp_group)
    f_BE = counts_BE / (tokens * topk_ids_BSK.shape[-1])
    return (E * (f_BE * prob_sums_BE / tokens).sum(-1)).mean()


class Qwen3MoeSparseMoeBlock(nn.Module):
    shared_experts = None  # no module called directly in stage 1 (models.MoeBlock)

    def __init__(self, cfg: Qwen3MoeCfg):
        super().__init__()
        self.cfg = cfg
        self.gate = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=False)
        self.experts = Qwen3MoeExperts(cfg)

    def route(self, x_BSD: torch.Tensor, aux_loss_scale: float):
        """Softmax over all experts (fp32), top-k, optional renormalisation. Returns (topk_ids_TK, topk_w_TK)."""
        B, S, D = x_BSD.shape
        probs_BSE = F.linear(x_BSD, self.gate.weight.to(x_BSD.dtype)).float().softmax(-1)
        if self.cfg.force_balanced_routing:  # round-robin over each rank's own tokens: balanced under EP too
            K = self.cfg.num_experts_per_tok
            topk_ids_BSK = (torch.arange(B * S * K, device=x_BSD.device) % self.cfg.num_experts).view(B, S, K)
            topk_w_BSK = probs_BSE.gather(-1, topk_ids_BSK)
        else:
            topk_w_BSK, topk_ids_BSK = torch.topk(probs_BSE, self.cfg.num_experts_per_tok, dim=-1)
        if self.cfg.norm_topk_prob:
            topk_w_BSK = topk_w_BSK / topk_w_BSK.sum(-1, keepdim=True)
        if self.cfg.aux_loss_type != "none" and self.training and aux_loss_scale > 0:
            aux = load_balancing_loss(probs_BSE, topk_ids_BSK, self.cfg.aux_loss_type)
            topk_w_BSK = AttachAuxLoss.apply(topk_w_BSK, aux * aux_loss_scale)
        K = self.cfg.num_experts_per_tok
        return topk_ids_BSK.reshape(B * S, K), topk_w_BSK.reshape(B * S, K)


class Qwen3MoeDecoderLayer(nn.Module):
    is_moe = True

    def __init__(self, cfg: Qwen3MoeCfg):
        super().__init__()
        self.num_experts = cfg.num_experts
        self.input_layernorm = Qwen3MoeRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Qwen3MoeAttention(cfg)
        self.post_attention_layernorm = Qwen3MoeRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = Qwen3MoeSparseMoeBlock(cfg)

    def forward_stage1(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        """Norm, attention, residual, norm, routing. Returns (h_BSD residual, n_TD expert input, ids, weights)."""
        h_BSD = x_BSD + self.self_attn(self.input_layernorm(x_BSD), cos, sin)
        n_BSD = self.post_attention_layernorm(h_BSD)
        topk_ids_TK, topk_w_TK = self.mlp.route(n_BSD, aux_loss_scale)
        # The experts' input leaves in the matmul dtype: the permutation (or all-to-all) moves half of fp32's
        # bytes, and no cast runs on its K-times-larger routed copy (nor on that copy's gradient).
        return h_BSD, n_BSD.reshape(-1, n_BSD.shape[-1]).to(autocast_dtype(n_BSD)), topk_ids_TK, topk_w_TK

    def forward_stage3(self, x_ND: torch.Tensor, tokens_per_expert_E: torch.Tensor) -> torch.Tensor:
        return self.mlp.experts(x_ND, tokens_per_expert_E)

    def forward_stage5(self, h_BSD: torch.Tensor, y_TKD: torch.Tensor, topk_w_TK: torch.Tensor) -> torch.Tensor:
        return h_BSD + (y_TKD * topk_w_TK[..., None].to(y_TKD.dtype)).sum(1).view_as(h_BSD)

    def forward(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        """All five stages in a row; stages 2 and 4 are local permutations, or all-to-alls under EP."""
        h_BSD, n_TD, topk_ids_TK, topk_w_TK = self.forward_stage1(x_BSD, cos, sin, aux_loss_scale)
        x_ND, tokens_per_expert_E, plan = dispatch(n_TD, topk_ids_TK, self.num_experts)
        y_ND = self.forward_stage3(x_ND, tokens_per_expert_E)
        return self.forward_stage5(h_BSD, combine(y_ND, plan), topk_w_TK)

    def reference_forward(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        """The layer's eager oracle (one rank), sharing no stage code with the fast path: attention as an explicit
        causal softmax, routing by a full sort, each routed copy through its expert's weights gathered per token,
        and the combine as a loop over the K choices; matmuls in the autocast dtype, as the stages run them."""
        cfg, experts, dtype = self.mlp.cfg, self.mlp.experts, autocast_dtype(x_BSD)
        h_BSD = x_BSD + attention_reference(self.self_attn, self.input_layernorm(x_BSD), cos, sin)
        B, S, D = h_BSD.shape
        n_TD = self.post_attention_layernorm(h_BSD).reshape(B * S, D)
        probs_TE = F.linear(n_TD.to(dtype), self.mlp.gate.weight.to(dtype)).float().softmax(-1)
        K = cfg.num_experts_per_tok
        if cfg.force_balanced_routing:
            ids_TK = (torch.arange(B * S * K, device=n_TD.device) % cfg.num_experts).view(B * S, K)
            w_TK = probs_TE.gather(-1, ids_TK)
        else:
            w_TK, ids_TK = (t[:, :K] for t in probs_TE.sort(-1, descending=True))
            w_TK = w_TK / w_TK.sum(-1, keepdim=True) if cfg.norm_topk_prob else w_TK
        if cfg.aux_loss_type != "none" and self.training and aux_loss_scale > 0:
            aux = load_balancing_loss(probs_TE.view(B, S, -1), ids_TK.view(B, S, K), cfg.aux_loss_type)
            w_TK = AttachAuxLoss.apply(w_TK, aux * aux_loss_scale)
        x_TD, out_TD = n_TD.to(dtype), 0
        for k in range(K):
            e_T = ids_TK[:, k]
            gate_TI, up_TI = torch.einsum("td,tjd->tj", x_TD, experts.gate_up_proj[e_T].to(dtype)).chunk(2, -1)
            y_TD = torch.einsum("ti,tdi->td", F.silu(gate_TI) * up_TI, experts.down_proj[e_T].to(dtype))
            out_TD = out_TD + y_TD * w_TK[:, k, None].to(dtype)
        return h_BSD + out_TD.view(B, S, D)


class Qwen3MoeLMHead(nn.Linear):
    """The output head. With labels it returns the summed token cross-entropy, computed a chunk of tokens at
    a time (operators/cross_entropy.py); going through this module's forward lets FSDP gather its weight."""

    def forward(self, n_TD: torch.Tensor, labels_T: torch.Tensor | None = None) -> torch.Tensor:
        if labels_T is None:
            return F.linear(n_TD, self.weight)
        dtype = autocast_dtype(n_TD)
        with torch.autocast(n_TD.device.type, enabled=False):  # the weight is cast inside, its gradient summed in fp32
            return linear_cross_entropy(n_TD.to(dtype), self.weight, labels_T, fp8=precision.fp8)


class Qwen3MoeModel(nn.Module):
    def __init__(self, cfg: Qwen3MoeCfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        # A dict keyed by the global layer index: a pipeline stage keeps only its own layers, under the same names.
        self.layers = nn.ModuleDict({str(i): Qwen3MoeDecoderLayer(cfg) for i in range(cfg.num_hidden_layers)})
        self.norm = Qwen3MoeRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Qwen3MoeForCausalLM(nn.Module):
    def __init__(self, cfg: Qwen3MoeCfg):
        super().__init__()
        self.cfg = cfg
        self.model = Qwen3MoeModel(cfg)
        self.lm_head = Qwen3MoeLMHead(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        if not any(p.is_meta for p in self.parameters()):
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """Each tensor (each expert, for stacked experts) draws from a generator seeded by its name, so
        any rank can initialise exactly its own slice of the model, and every mesh starts identical."""
        base = torch.initial_seed()

        def normal_(t: torch.Tensor, key: str):
            g = torch.Generator(device=t.device).manual_seed(base + zlib.crc32(key.encode()))
            t.normal_(0.0, self.cfg.initializer_range, generator=g)

        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif ".mlp.experts." in name:
                offset = self.get_submodule(name.rsplit(".", 1)[0]).expert_offset
                for e in range(p.shape[0]):
                    normal_(p[e], f"{name}.{offset + e}")
            else:
                normal_(p, name)

    def rope(self, input_ids_BS: torch.Tensor, position_ids_BS: torch.Tensor | None = None):
        if position_ids_BS is None:
            position_ids_BS = torch.arange(input_ids_BS.shape[1], device=input_ids_BS.device).expand_as(input_ids_BS)
        return rope_cos_sin(position_ids_BS, self.cfg.head_dim, self.cfg.rope_theta)

    def logits(self, h_BSD: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model.norm(h_BSD))

    def loss_sum(self, h_BSD: torch.Tensor, labels_BS: torch.Tensor) -> torch.Tensor:
        """Sum (not mean) of token cross-entropies, label -100 ignored: the trainer divides by the global
        batch's token count, so every token weighs the same whatever micro-batch it falls in. The head and
        the loss run a chunk of tokens at a time, never holding fp32 logits for the whole batch."""
        return self.lm_head(self.model.norm(h_BSD).reshape(-1, self.cfg.hidden_size), labels_BS.reshape(-1))

    def forward(self, input_ids_BS, labels_BS=None, aux_loss_scale=0.0, reference=False, position_ids_BS=None):
        """Logits (B, S, V) without labels; the summed cross-entropy with labels."""
        cos, sin = self.rope(input_ids_BS, position_ids_BS)
        h_BSD = self.model.embed_tokens(input_ids_BS)
        for layer in self.model.layers.values():
            run = layer.reference_forward if reference else layer
            h_BSD = run(h_BSD, cos, sin, aux_loss_scale)
        return self.logits(h_BSD) if labels_BS is None else self.loss_sum(h_BSD, labels_BS)


def flops_per_token(cfg: Qwen3MoeCfg, seq_len: int) -> float:
    """Training FLOPs per token: 6 x (active matmul parameters) plus causal attention scores.

    Matmul parameters per layer: q/k/v/o projections, the router, and K experts of 3*D*I each; plus the
    output head. Attention: QK^T and PV are 2 * 2 * S * H * Dh FLOPs per token forward, halved by the
    causal mask; backward is twice forward, hence 6 * S * H * Dh per layer.
    """
    D, H, G, Dh = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    attn_params = D * H * Dh * 2 + D * G * Dh * 2
    moe_params = D * cfg.num_experts + cfg.num_experts_per_tok * 3 * D * cfg.moe_intermediate_size
    matmul_params = cfg.num_hidden_layers * (attn_params + moe_params) + D * cfg.vocab_size
    return 6.0 * matmul_params + cfg.num_hidden_layers * 6.0 * seq_len * H * Dh


# ---- Hugging Face conversion: the Hub's on-disk layout keeps one tensor per expert ----


def cfg_from_hf(hf: dict) -> Qwen3MoeCfg:
    if hf.get("mlp_only_layers") or hf.get("decoder_sparse_step", 1) != 1:
        raise ConfigError(
            "this Qwen3-MoE checkpoint has dense layers (mlp_only_layers/decoder_sparse_step); "
            "pithtrain's qwen3_moe supports all-MoE layers only."
        )
    rope = hf.get("rope_parameters") or {}
    return Qwen3MoeCfg(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_hidden_layers=hf["num_hidden_layers"],
        num_attention_heads=hf["num_attention_heads"],
        num_key_value_heads=hf["num_key_value_heads"],
        head_dim=hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
        num_experts=hf.get("num_experts") or hf["num_local_experts"],  # transformers 5 writes the latter
        num_experts_per_tok=hf["num_experts_per_tok"],
        moe_intermediate_size=hf["moe_intermediate_size"],
        norm_topk_prob=hf.get("norm_topk_prob", False),
        rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
        rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
        max_position_embeddings=hf.get("max_position_embeddings", 40960),
        tie_word_embeddings=hf.get("tie_word_embeddings", False),
        aux_loss_coef=hf.get("router_aux_loss_coef", 1e-3),
        initializer_range=hf.get("initializer_range", 0.02),
    )


def cfg_to_hf(cfg: Qwen3MoeCfg) -> dict:
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.moe_intermediate_size * cfg.num_experts_per_tok,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "num_experts": cfg.num_experts,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "moe_intermediate_size": cfg.moe_intermediate_size,
        "norm_topk_prob": cfg.norm_topk_prob,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "max_position_embeddings": cfg.max_position_embeddings,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "router_aux_loss_coef": cfg.aux_loss_coef,
        "initializer_range": cfg.initializer_range,
        "hidden_act": "silu",
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "attention_bias": False,
        "torch_dtype": "bfloat16",
    }


def state_dict_from_hf(hf_sd: dict[str, torch.Tensor], cfg: Qwen3MoeCfg) -> dict[str, torch.Tensor]:
    """Hub layout -> this file's layout: identical names, except experts stacked into [E, ...] tensors."""
    sd = {k: v for k, v in hf_sd.items() if ".mlp.experts." not in k}
    if cfg.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp.experts"
        experts = range(cfg.num_experts)
        sd[f"{p}.gate_up_proj"] = torch.stack(
            [torch.cat([hf_sd[f"{p}.{e}.gate_proj.weight"], hf_sd[f"{p}.{e}.up_proj.weight"]]) for e in experts]
        )
        sd[f"{p}.down_proj"] = torch.stack([hf_sd[f"{p}.{e}.down_proj.weight"] for e in experts])
    return sd


def state_dict_to_hf(sd: dict[str, torch.Tensor], cfg: Qwen3MoeCfg) -> dict[str, torch.Tensor]:
    hf_sd = {k: v for k, v in sd.items() if ".mlp.experts." not in k}
    if cfg.tie_word_embeddings:
        hf_sd.pop("lm_head.weight", None)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp.experts"
        gate, up = sd[f"{p}.gate_up_proj"].chunk(2, dim=1)
        for e in range(cfg.num_experts):
            hf_sd[f"{p}.{e}.gate_proj.weight"] = gate[e].contiguous()
            hf_sd[f"{p}.{e}.up_proj.weight"] = up[e].contiguous()
            hf_sd[f"{p}.{e}.down_proj.weight"] = sd[f"{p}.down_proj"][e].contiguous()
    return hf_sd
