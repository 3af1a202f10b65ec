"""DeepSeek-V2 (DeepSeek-V2-Lite, DeepSeek-V2), self-contained.

Shape legend: B batch, S sequence, D hidden, H heads, E routed experts, K experts per token, I expert FFN width,
T tokens (B*S), N routed copies (T*K), V vocab. Attention widths: C compressed key/value (kv_lora_rank),
L compressed query (q_lora_rank), Dn and Dr the position-free and rotary parts of a query/key head,
Dq = Dn + Dr, Dv a value head, F = Dr/2 rotary frequencies.

Multi-head latent attention (DeepSeek-V2 paper, sec. 2.1): each token's keys and values are rebuilt from one
C-wide latent; a separate Dr-wide key shared by all heads carries RoPE ("decoupled RoPE", sec. 2.1.3). The first
`first_k_dense_replace` layers have a dense SwiGLU MLP; the others route each token to K of E experts and also
pass it through the shared experts (DeepSeekMoE, sec. 2.2).

Layer contract as in qwen3_moe.py: `forward_stage1` (norm, attention, norm, routing), `forward_stage3` (routed
experts on expert-grouped tokens), `forward_stage5` (weighted combine + residual); stages 2 and 4 are
`modules/expert_parallel.py`'s dispatch/combine (local permutation on one rank, all-to-all under EP). The shared
experts run inside stage 1 and are added to the returned residual, so stages 3-5 only see routed experts. A
dense layer does its whole work in stage 1 and returns `n_TD = None`; callers then skip stages 2-5.
Attribute names follow transformers' DeepseekV2; the Hub keeps one tensor per expert on disk.
Under training.precision = "fp8" (`precision.fp8`), the routed and shared experts, the head and the attention
projections but kv_a_proj_with_mqa run FP8 matmuls (operators/fp8_linear.py); the dense layers' MLP stays bf16.
"""

import dataclasses
import math
import zlib
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
import torch.distributed.nn.functional as dist_fn
import torch.nn.functional as F
from torch import nn

from pithtrain.config import ConfigError, NonNegative, Positive, Range
from pithtrain.contexts import distributed, precision
from pithtrain.modules.expert_parallel import combine, dispatch
from pithtrain.modules.ring_attention import ring_attention
from pithtrain.operators.cross_entropy import linear_cross_entropy
from pithtrain.operators.fp8_linear import fp8_grouped_linear, fp8_linear
from pithtrain.operators.swiglu import swiglu
from pithtrain.operators.weight_cast import cast_weight


@dataclass
class DeepseekV2Cfg:
    family: Literal["deepseek_v2"] = "deepseek_v2"
    """Model family; selects this file."""
    vocab_size: Positive = 102400
    """Number of token ids; every id in the data must be below it."""
    hidden_size: Positive = 2048
    """Width D of the residual stream."""
    intermediate_size: Positive = 10944
    """Hidden width of the SwiGLU MLP of the dense layers."""
    num_hidden_layers: Positive = 27
    """Number of decoder layers."""
    first_k_dense_replace: NonNegative = 1
    """How many of the first layers are dense; the rest are MoE."""
    num_attention_heads: Positive = 16
    """Attention heads H."""
    q_lora_rank: NonNegative = 0
    """Width L of the compressed query; 0 projects queries directly (V2-Lite; Hugging Face writes null)."""
    kv_lora_rank: Positive = 512
    """Width C of the compressed key/value latent."""
    qk_nope_head_dim: Positive = 128
    """Width Dn of the position-free part of a query/key head."""
    qk_rope_head_dim: Positive = 64
    """Width Dr of the rotary part of a query/key head (one rotary key shared by all heads); even."""
    v_head_dim: Positive = 128
    """Width Dv of a value head."""
    n_routed_experts: Positive = 64
    """Routed experts E per MoE layer."""
    n_shared_experts: Positive = 2
    """Shared experts per MoE layer (one SwiGLU MLP of this many times the expert width); every token uses them."""
    num_experts_per_tok: Positive = 6
    """Routed experts K each token is sent to."""
    moe_intermediate_size: Positive = 1408
    """Hidden width I of one expert's SwiGLU MLP."""
    scoring_func: Literal["softmax", "sigmoid"] = "softmax"
    """Router scores from the logits: softmax over experts (DeepSeek-V2) or per-expert sigmoid."""
    topk_method: Literal["greedy", "group_limited_greedy"] = "greedy"
    """Top-k over all experts, or only within the topk_group best of n_group expert groups."""
    n_group: Positive = 1
    """Expert groups for group_limited_greedy routing; must divide n_routed_experts."""
    topk_group: Positive = 1
    """Groups a token may use under group_limited_greedy routing."""
    norm_topk_prob: bool = False
    """Renormalise the top-k weights to sum to one (before routed_scaling_factor); all V2 checkpoints: false."""
    routed_scaling_factor: Annotated[float, Range(gt=0)] = 1.0
    """Multiplier of the routed experts' weights."""
    rms_norm_eps: Annotated[float, Range(gt=0)] = 1e-6
    """Epsilon added to the mean square inside RMSNorm."""
    rope_theta: Annotated[float, Range(gt=0)] = 10000.0
    """RoPE base frequency."""
    rope_factor: Annotated[float, Range(ge=1)] = 40.0
    """YaRN context-extension factor; 1 means plain RoPE."""
    rope_original_max_position_embeddings: Positive = 4096
    """YaRN: the context length of pre-training, before extension."""
    rope_beta_fast: Annotated[float, Range(gt=0)] = 32.0
    """YaRN: frequencies turning more often than this over the original context are kept as they are."""
    rope_beta_slow: Annotated[float, Range(gt=0)] = 1.0
    """YaRN: frequencies turning less often than this over the original context are divided by rope_factor."""
    rope_mscale: Annotated[float, Range(ge=0)] = 0.707
    """YaRN: with rope_mscale_all_dim, sets the cos/sin scale mscale(rope_mscale) / mscale(rope_mscale_all_dim)."""
    rope_mscale_all_dim: Annotated[float, Range(ge=0)] = 0.707
    """YaRN: the softmax scale is multiplied by mscale(rope_mscale_all_dim)^2; 0 leaves it alone."""
    max_position_embeddings: Positive = 163840
    """Longest sequence the model is meant for (recorded in exported configs)."""
    tie_word_embeddings: bool = False
    """Share the input embedding with the output head."""
    aux_loss_type: Literal["global_batch", "sequence", "none"] = "sequence"
    """Load-balancing loss: over all tokens of the micro-batch, per sequence (averaged; DeepSeek's), or off."""
    aux_loss_coef: Annotated[float, Range(ge=0)] = 1e-3
    """Weight of the load-balancing loss (DeepSeek's aux_loss_alpha)."""
    initializer_range: Annotated[float, Range(gt=0)] = 0.02
    """Standard deviation of the normal init of every matrix."""

    def __post_init__(self):
        if self.first_k_dense_replace > self.num_hidden_layers:
            raise ConfigError(
                f"model.first_k_dense_replace = {self.first_k_dense_replace} must be at most "
                f"model.num_hidden_layers = {self.num_hidden_layers}."
            )
        if self.qk_rope_head_dim % 2:
            raise ConfigError(f"model.qk_rope_head_dim = {self.qk_rope_head_dim} must be even (RoPE rotates pairs).")
        if self.n_routed_experts % self.n_group or self.topk_group > self.n_group:
            raise ConfigError(
                f"model.n_group = {self.n_group} must divide model.n_routed_experts = {self.n_routed_experts} "
                f"and be at least model.topk_group = {self.topk_group}."
            )
        usable = self.n_routed_experts
        if self.topk_method == "group_limited_greedy":
            usable = self.topk_group * self.n_routed_experts // self.n_group
        if self.num_experts_per_tok > usable:
            raise ConfigError(
                f"model.num_experts_per_tok = {self.num_experts_per_tok} must be at most the {usable} experts a "
                f"token can reach (model.n_routed_experts = {self.n_routed_experts}, model.topk_method = "
                f"{self.topk_method!r}, model.n_group = {self.n_group}, model.topk_group = {self.topk_group})."
            )


class DeepseekV2RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature sqrt(1/t) = 0.1 ln(s) + 1 (Peng et al. 2023, sec. 3.4); DeepSeek scales 0.1."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_inv_freq(cfg: DeepseekV2Cfg) -> torch.Tensor:
    """RoPE inverse frequencies (F,), YaRN "NTK-by-parts" interpolated when rope_factor > 1 (Peng et al. 2023,
    sec. 3.2; transformers' `_compute_yarn_parameters` with truncation, as DeepSeek's own code does):
    frequencies that turn more than beta_fast times over the original context are kept, those turning fewer than
    beta_slow times are divided by the factor, with a linear ramp in between."""
    dim, theta, factor = cfg.qk_rope_head_dim, cfg.rope_theta, cfg.rope_factor
    original = cfg.rope_original_max_position_embeddings
    pos_freqs_F = theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)
    if factor == 1.0:
        return 1.0 / pos_freqs_F

    def correction_dim(rotations: float) -> float:  # the dim index that turns `rotations` times in the context
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(cfg.rope_beta_fast)), 0)
    high = min(math.ceil(correction_dim(cfg.rope_beta_slow)), dim - 1)
    ramp_F = ((torch.arange(dim // 2, dtype=torch.float) - low) / (high - low if high != low else 1e-3)).clamp(0, 1)
    return 1.0 / (factor * pos_freqs_F) * ramp_F + 1.0 / pos_freqs_F * (1 - ramp_F)


def rope_cos_sin(position_ids_BS: torch.Tensor, cfg: DeepseekV2Cfg):
    """cos/sin tables (B, S, F) in fp32, times YaRN's cos/sin scale (1 without YaRN)."""
    factor, m, m_all = cfg.rope_factor, cfg.rope_mscale, cfg.rope_mscale_all_dim
    scale = yarn_mscale(factor, m) / yarn_mscale(factor, m_all) if m and m_all else yarn_mscale(factor)
    freqs_BSF = position_ids_BS[..., None].float() * yarn_inv_freq(cfg).to(position_ids_BS.device)
    return freqs_BSF.cos() * scale, freqs_BSF.sin() * scale


def apply_rope(x_BHSDr: torch.Tensor, cos_BSF: torch.Tensor, sin_BSF: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs (x[2f], x[2f+1]) by frequency f: DeepSeek's interleaved layout, in fp32."""
    x_BHSF2 = x_BHSDr.float().unflatten(-1, (-1, 2))
    x0, x1 = x_BHSF2[..., 0], x_BHSF2[..., 1]
    cos, sin = cos_BSF[:, None], sin_BSF[:, None]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2).to(x_BHSDr.dtype)


def project(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """A projection that may run FP8: FP8 matmuls under training.precision = "fp8" (operators/fp8_linear.py)."""
    return fp8_linear(x, linear.weight) if precision.fp8 else linear(x)


class DeepseekV2Attention(nn.Module):
    """Multi-head latent attention on causal SDPA, or ring attention under CP (keys Dq wide, values Dv wide)."""

    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        D, H, C, L = cfg.hidden_size, cfg.num_attention_heads, cfg.kv_lora_rank, cfg.q_lora_rank
        self.num_heads, self.kv_lora_rank, self.q_lora_rank = H, C, L
        self.nope_dim, self.rope_dim, self.v_dim = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        Dq = self.nope_dim + self.rope_dim
        if L:  # upstream's latent norms use the default eps 1e-6, not rms_norm_eps
            self.q_a_proj = nn.Linear(D, L, bias=False)
            self.q_a_layernorm = DeepseekV2RMSNorm(L, 1e-6)
            self.q_b_proj = nn.Linear(L, H * Dq, bias=False)
        else:
            self.q_proj = nn.Linear(D, H * Dq, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(D, C + self.rope_dim, bias=False)
        self.kv_a_layernorm = DeepseekV2RMSNorm(C, 1e-6)
        self.kv_b_proj = nn.Linear(C, H * (self.nope_dim + self.v_dim), bias=False)
        self.o_proj = nn.Linear(H * self.v_dim, D, bias=False)
        self.softmax_scale = Dq**-0.5
        if cfg.rope_mscale_all_dim:  # YaRN's temperature, applied to the scores (DeepSeek's yarn_get_mscale)
            self.softmax_scale *= yarn_mscale(cfg.rope_factor, cfg.rope_mscale_all_dim) ** 2

    def forward(self, x_BSD: torch.Tensor, cos_BSF: torch.Tensor, sin_BSF: torch.Tensor) -> torch.Tensor:
        B, S, _ = x_BSD.shape
        H, Dn, Dr, Dv = self.num_heads, self.nope_dim, self.rope_dim, self.v_dim
        if self.q_lora_rank:
            q_flat = project(self.q_b_proj, self.q_a_layernorm(project(self.q_a_proj, x_BSD)))
        else:
            q_flat = project(self.q_proj, x_BSD)
        q_nope_BHSDn, q_pe_BHSDr = q_flat.view(B, S, H, Dn + Dr).transpose(1, 2).split([Dn, Dr], dim=-1)
        # Never FP8: its output width C + Dr (512 + 64 = 576 in V2 and V2-Lite) is not a multiple of 128.
        c_BSC, k_pe_BSDr = self.kv_a_proj_with_mqa(x_BSD).split([self.kv_lora_rank, Dr], dim=-1)
        kv_BHSDnv = project(self.kv_b_proj, self.kv_a_layernorm(c_BSC)).view(B, S, H, Dn + Dv).transpose(1, 2)
        k_nope_BHSDn, v_BHSDv = kv_BHSDnv.split([Dn, Dv], dim=-1)
        q_pe_BHSDr = apply_rope(q_pe_BHSDr, cos_BSF, sin_BSF)
        k_pe_B1SDr = apply_rope(k_pe_BSDr[:, None], cos_BSF, sin_BSF)
        q_BHSDq = torch.cat((q_nope_BHSDn, q_pe_BHSDr), dim=-1)
        k_BHSDq = torch.cat((k_nope_BHSDn, k_pe_B1SDr.expand(B, H, S, Dr)), dim=-1)
        if distributed.cp_size > 1:  # this rank holds a zigzag shard of each sequence
            o_BHSDv = ring_attention(q_BHSDq, k_BHSDq, v_BHSDv, distributed.cp_group, scale=self.softmax_scale)
        else:
            o_BHSDv = F.scaled_dot_product_attention(
                q_BHSDq, k_BHSDq, v_BHSDv, is_causal=True, scale=self.softmax_scale
            )
        return project(self.o_proj, o_BHSDv.transpose(1, 2).reshape(B, S, H * Dv))


def attention_reference(attn: DeepseekV2Attention, x_BSD: torch.Tensor, cos_BSF: torch.Tensor, sin_BSF: torch.Tensor):
    """`DeepseekV2Attention.forward` written out (one rank): scores as the sum of the no-position part and the
    rotary part (interleaved pairs, fp32), softmax over causally masked scores (fp32), for `reference_forward`."""
    B, S, _ = x_BSD.shape
    H, Dn, Dr, Dv, C = attn.num_heads, attn.nope_dim, attn.rope_dim, attn.v_dim, attn.kv_lora_rank
    if attn.q_lora_rank:
        q_flat = F.linear(attn.q_a_layernorm(F.linear(x_BSD, attn.q_a_proj.weight)), attn.q_b_proj.weight)
    else:
        q_flat = F.linear(x_BSD, attn.q_proj.weight)
    q_BSHDq = q_flat.view(B, S, H, Dn + Dr)
    ckv_BSX = F.linear(x_BSD, attn.kv_a_proj_with_mqa.weight)
    kv_BSHX = F.linear(attn.kv_a_layernorm(ckv_BSX[..., :C]), attn.kv_b_proj.weight).view(B, S, H, Dn + Dv)

    def rotate(t_BSXDr):  # pair (2f, 2f+1) turned by frequency f
        t, c, s = t_BSXDr.float(), cos_BSF[:, :, None], sin_BSF[:, :, None]
        out = torch.empty_like(t)
        out[..., 0::2], out[..., 1::2] = t[..., 0::2] * c - t[..., 1::2] * s, t[..., 0::2] * s + t[..., 1::2] * c
        return out.to(t_BSXDr.dtype)

    q_pe_BSHDr, k_pe_BS1Dr = rotate(q_BSHDq[..., Dn:]), rotate(ckv_BSX[..., None, C:])
    scores_BHSS = (
        torch.einsum("bqhd,bkhd->bhqk", q_BSHDq[..., :Dn], kv_BSHX[..., :Dn]).float()
        + torch.einsum("bqhd,bkd->bhqk", q_pe_BSHDr, k_pe_BS1Dr[:, :, 0]).float()
    ) * attn.softmax_scale
    causal_SS = torch.ones(S, S, dtype=torch.bool, device=x_BSD.device).tril()
    probs_BHSS = scores_BHSS.masked_fill(~causal_SS, float("-inf")).softmax(-1)
    v_BSHDv = kv_BSHX[..., Dn:]
    o_BSHDv = torch.einsum("bhqk,bkhd->bqhd", probs_BHSS.to(v_BSHDv.dtype), v_BSHDv)
    return F.linear(o_BSHDv.reshape(B, S, H * Dv), attn.o_proj.weight)


class DeepseekV2MLP(nn.Module):
    """SwiGLU MLP: the dense layers' MLP and the shared experts. Only the shared experts (fp8_ok) run FP8 under
    training.precision = "fp8": their width is n_shared_experts x moe_intermediate_size, checked to be a multiple
    of 128; the dense MLP stays bf16 (one or a few layers, and V2-Lite's intermediate_size 10944 = 85.5 x 128)."""

    def __init__(self, hidden_size: int, intermediate_size: int, fp8_ok: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.fp8_ok = fp8_ok

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if precision.fp8 and self.fp8_ok:
            h = F.silu(fp8_linear(x, self.gate_proj.weight)) * fp8_linear(x, self.up_proj.weight)
            return fp8_linear(h, self.down_proj.weight)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DeepseekV2Experts(nn.Module):
    """This rank's routed SwiGLU experts as stacked weights (dim 0 = local expert; under expert parallelism,
    rank r holds global experts r*E/EP ... (r+1)*E/EP - 1); `forward` runs them with two grouped matmuls."""

    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        E, D, I = cfg.n_routed_experts // distributed.ep_size, cfg.hidden_size, cfg.moe_intermediate_size
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
    token of the micro-batch; `sequence` computes it per sequence and averages (DeepSeek-V2's expert-level
    balance loss, sec. 2.2.3). Under context parallelism the sums run over the whole sequence (all CP ranks hold
    a shard of every sequence of the micro-batch); every CP rank then holds the same value and back-propagates
    1/CP of it, since the all-reduce's backward sums them."""
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


class DeepseekV2Moe(nn.Module):
    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        self.cfg = cfg
        self.gate = nn.Linear(cfg.hidden_size, cfg.n_routed_experts, bias=False)
        self.experts = DeepseekV2Experts(cfg)
        self.shared_experts = DeepseekV2MLP(cfg.hidden_size, cfg.moe_intermediate_size * cfg.n_shared_experts, True)

    def route(self, x_BSD: torch.Tensor, aux_loss_scale: float):
        """Scores in fp32, optional group limit, top-k, optional renormalisation, routed scaling factor.
        Returns (topk_ids_TK, topk_w_TK)."""
        cfg = self.cfg
        B, S, D = x_BSD.shape
        logits_BSE = F.linear(x_BSD, self.gate.weight.to(x_BSD.dtype)).float()
        scores_BSE = logits_BSE.softmax(-1) if cfg.scoring_func == "softmax" else logits_BSE.sigmoid()
        candidates_BSE = scores_BSE
        if cfg.topk_method == "group_limited_greedy":  # like sec. 2.2.2's device limit: a group scores its best expert
            group_BSG = scores_BSE.unflatten(-1, (cfg.n_group, -1)).amax(-1)
            keep_BSG = torch.zeros_like(group_BSG, dtype=torch.bool)
            keep_BSG.scatter_(-1, group_BSG.topk(cfg.topk_group, dim=-1).indices, True)
            keep_BSE = keep_BSG.repeat_interleave(cfg.n_routed_experts // cfg.n_group, dim=-1)
            candidates_BSE = scores_BSE.masked_fill(~keep_BSE, 0.0)
        topk_w_BSK, topk_ids_BSK = torch.topk(candidates_BSE, cfg.num_experts_per_tok, dim=-1)
        if cfg.norm_topk_prob:
            topk_w_BSK = topk_w_BSK / (topk_w_BSK.sum(-1, keepdim=True) + 1e-20)
        topk_w_BSK = topk_w_BSK * cfg.routed_scaling_factor
        if cfg.aux_loss_type != "none" and self.training and aux_loss_scale > 0:
            probs_BSE = scores_BSE if cfg.scoring_func == "softmax" else scores_BSE / scores_BSE.sum(-1, keepdim=True)
            aux = load_balancing_loss(probs_BSE, topk_ids_BSK, cfg.aux_loss_type)
            topk_w_BSK = AttachAuxLoss.apply(topk_w_BSK, aux * aux_loss_scale)
        K = cfg.num_experts_per_tok
        return topk_ids_BSK.reshape(B * S, K), topk_w_BSK.reshape(B * S, K)


class DeepseekV2DecoderLayer(nn.Module):
    """A MoE layer: routed experts through stages 3-5, shared experts inside stage 1."""

    is_moe = True

    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        self.num_experts = cfg.n_routed_experts
        self.input_layernorm = DeepseekV2RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = DeepseekV2Attention(cfg)
        self.post_attention_layernorm = DeepseekV2RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = DeepseekV2Moe(cfg)

    def forward_stage1(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        """Norm, attention, residual, norm, routing; the shared experts' output joins the residual h_BSD.
        Returns (h_BSD residual, n_TD expert input, ids, weights)."""
        h_BSD = x_BSD + self.self_attn(self.input_layernorm(x_BSD), cos, sin)
        n_BSD = self.post_attention_layernorm(h_BSD)
        topk_ids_TK, topk_w_TK = self.mlp.route(n_BSD, aux_loss_scale)
        h_BSD = h_BSD + self.mlp.shared_experts(n_BSD)
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
        causal softmax, routing (group limit included) by full sorts, each routed copy through its expert's weights
        gathered per token, and the combine as a loop over the K choices; matmuls in the autocast dtype."""
        cfg, experts, dtype = self.mlp.cfg, self.mlp.experts, autocast_dtype(x_BSD)
        h_BSD = x_BSD + attention_reference(self.self_attn, self.input_layernorm(x_BSD), cos, sin)
        n_BSD = self.post_attention_layernorm(h_BSD)
        B, S, D = n_BSD.shape
        n_TD, K = n_BSD.reshape(B * S, D), cfg.num_experts_per_tok
        logits_TE = F.linear(n_TD.to(dtype), self.mlp.gate.weight.to(dtype)).float()
        scores_TE = logits_TE.softmax(-1) if cfg.scoring_func == "softmax" else logits_TE.sigmoid()
        candidates_TE = scores_TE
        if cfg.topk_method == "group_limited_greedy":  # only experts of the topk_group groups with the best maxima
            best_TG = scores_TE.view(B * S, cfg.n_group, -1).max(-1).values
            groups_TX = best_TG.sort(-1, descending=True).indices[:, : cfg.topk_group]
            group_of_E = torch.arange(cfg.n_routed_experts, device=n_TD.device) // (cfg.n_routed_experts // cfg.n_group)
            allowed_TE = (group_of_E[None, :, None] == groups_TX[:, None, :]).any(-1)
            candidates_TE = torch.where(allowed_TE, scores_TE, 0.0)
        w_TK, ids_TK = (t[:, :K] for t in candidates_TE.sort(-1, descending=True))
        w_TK = w_TK / (w_TK.sum(-1, keepdim=True) + 1e-20) if cfg.norm_topk_prob else w_TK
        w_TK = w_TK * cfg.routed_scaling_factor
        if cfg.aux_loss_type != "none" and self.training and aux_loss_scale > 0:
            probs_TE = scores_TE if cfg.scoring_func == "softmax" else scores_TE / scores_TE.sum(-1, keepdim=True)
            aux = load_balancing_loss(probs_TE.view(B, S, -1), ids_TK.view(B, S, K), cfg.aux_loss_type)
            w_TK = AttachAuxLoss.apply(w_TK, aux * aux_loss_scale)
        x_TD, out_TD = n_TD.to(dtype), 0
        for k in range(K):
            e_T = ids_TK[:, k]
            gate_TI, up_TI = torch.einsum("td,tjd->tj", x_TD, experts.gate_up_proj[e_T].to(dtype)).chunk(2, -1)
            y_TD = torch.einsum("ti,tdi->td", F.silu(gate_TI) * up_TI, experts.down_proj[e_T].to(dtype))
            out_TD = out_TD + y_TD * w_TK[:, k, None].to(dtype)
        return h_BSD + self.mlp.shared_experts(n_BSD) + out_TD.view(B, S, D)


class DeepseekV2DenseDecoderLayer(nn.Module):
    """One of the first `first_k_dense_replace` layers: stage 1 is the whole layer and returns n_TD None."""

    is_moe = False
    num_experts = 0

    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        self.input_layernorm = DeepseekV2RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = DeepseekV2Attention(cfg)
        self.post_attention_layernorm = DeepseekV2RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = DeepseekV2MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward_stage1(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        h_BSD = x_BSD + self.self_attn(self.input_layernorm(x_BSD), cos, sin)
        return h_BSD + self.mlp(self.post_attention_layernorm(h_BSD)), None, None, None

    def forward_stage3(self, x_ND: torch.Tensor, tokens_per_expert_E: torch.Tensor) -> torch.Tensor:
        raise AssertionError("a dense layer has no experts: callers skip stages 2-5 of a dense layer")

    def forward_stage5(self, h_BSD: torch.Tensor, y_TKD: torch.Tensor, topk_w_TK: torch.Tensor) -> torch.Tensor:
        raise AssertionError("a dense layer has no experts: callers skip stages 2-5 of a dense layer")

    def forward(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        return self.forward_stage1(x_BSD, cos, sin, aux_loss_scale)[0]

    def reference_forward(self, x_BSD, cos, sin, aux_loss_scale: float = 0.0):
        """The eager oracle: attention written out, then the MLP."""
        h_BSD = x_BSD + attention_reference(self.self_attn, self.input_layernorm(x_BSD), cos, sin)
        return h_BSD + self.mlp(self.post_attention_layernorm(h_BSD))


def autocast_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matmuls run in here: autocast's when it is on (ops it does not cover are cast by hand)."""
    on = torch.is_autocast_enabled(x.device.type)
    return torch.get_autocast_dtype(x.device.type) if on else x.dtype


class DeepseekV2LMHead(nn.Linear):
    """The output head. With labels it returns the summed token cross-entropy, computed a chunk of tokens at
    a time (operators/cross_entropy.py); going through this module's forward lets FSDP gather its weight."""

    def forward(self, n_TD: torch.Tensor, labels_T: torch.Tensor | None = None) -> torch.Tensor:
        if labels_T is None:
            return F.linear(n_TD, self.weight)
        dtype = autocast_dtype(n_TD)
        with torch.autocast(n_TD.device.type, enabled=False):  # the weight is cast inside, its gradient summed in fp32
            return linear_cross_entropy(n_TD.to(dtype), self.weight, labels_T, fp8=precision.fp8)


class DeepseekV2Model(nn.Module):
    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        # Keyed by the global layer index: a pipeline stage keeps only its own layers, under the same names.
        self.layers = nn.ModuleDict(
            {
                str(i): DeepseekV2DenseDecoderLayer(cfg)
                if i < cfg.first_k_dense_replace
                else DeepseekV2DecoderLayer(cfg)
                for i in range(cfg.num_hidden_layers)
            }
        )
        self.norm = DeepseekV2RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class DeepseekV2ForCausalLM(nn.Module):
    def __init__(self, cfg: DeepseekV2Cfg):
        super().__init__()
        self.cfg = cfg
        self.model = DeepseekV2Model(cfg)
        self.lm_head = DeepseekV2LMHead(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        if not any(p.is_meta for p in self.parameters()):
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """Each tensor (each expert, for stacked experts) draws from a generator seeded by its name, so
        any rank can initialise exactly its own slice of the model, and every mesh starts identical.
        Norms (the latent kv_a/q_a_layernorm included) start at one."""
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
        return rope_cos_sin(position_ids_BS, self.cfg)

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


def flops_per_token(cfg: DeepseekV2Cfg, seq_len: int) -> float:
    """Training FLOPs per token: 6 x (active matmul parameters) plus causal attention scores.

    Matmul parameters: per layer the MLA projections (q or q_a/q_b, kv_a, kv_b, o); per dense layer
    3*D*intermediate_size; per MoE layer the router, K routed experts and the shared experts of 3*D*I each;
    plus the output head. Attention: QK^T (Dq wide) and PV (Dv wide) are 2 * S * H * (Dq + Dv) FLOPs per token
    forward, halved by the causal mask; backward is twice forward, hence 3 * S * H * (Dq + Dv) per layer.
    """
    D, H, C, L = cfg.hidden_size, cfg.num_attention_heads, cfg.kv_lora_rank, cfg.q_lora_rank
    Dq, Dv = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, cfg.v_head_dim
    q_params = D * L + L * H * Dq if L else D * H * Dq
    attn_params = q_params + D * (C + cfg.qk_rope_head_dim) + C * H * (cfg.qk_nope_head_dim + Dv) + H * Dv * D
    experts = cfg.num_experts_per_tok + cfg.n_shared_experts
    moe_params = D * cfg.n_routed_experts + experts * 3 * D * cfg.moe_intermediate_size
    dense, moe = cfg.first_k_dense_replace, cfg.num_hidden_layers - cfg.first_k_dense_replace
    matmul_params = (
        cfg.num_hidden_layers * attn_params + dense * 3 * D * cfg.intermediate_size + moe * moe_params
    ) + D * cfg.vocab_size
    return 6.0 * matmul_params + cfg.num_hidden_layers * 3.0 * seq_len * H * (Dq + Dv)


# ---- Hugging Face conversion: the Hub's on-disk layout keeps one tensor per expert ----

HF_ROPE_KEYS = {"rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast",
                "beta_slow", "mscale", "mscale_all_dim", "truncate"}  # fmt: skip


def cfg_from_hf(hf: dict) -> DeepseekV2Cfg:
    if hf.get("moe_layer_freq", 1) != 1:
        raise ConfigError(f"moe_layer_freq = {hf['moe_layer_freq']}: pithtrain's deepseek_v2 needs every layer "
                          "after first_k_dense_replace to be MoE (moe_layer_freq = 1).")  # fmt: skip
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "yarn") or set(rope) - HF_ROPE_KEYS or rope.get("truncate", True) is False:
        raise ConfigError(f"rope_parameters = {rope}: pithtrain's deepseek_v2 supports default and yarn RoPE "
                          f"with the keys {sorted(HF_ROPE_KEYS)} (truncate true).")  # fmt: skip
    yarn = rope_type == "yarn"
    original = rope.get("original_max_position_embeddings", 4096)
    aux_coef = hf.get("aux_loss_alpha", 1e-3)
    return DeepseekV2Cfg(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        intermediate_size=hf["intermediate_size"],
        num_hidden_layers=hf["num_hidden_layers"],
        first_k_dense_replace=hf.get("first_k_dense_replace", 0),
        num_attention_heads=hf["num_attention_heads"],
        q_lora_rank=hf.get("q_lora_rank") or 0,
        kv_lora_rank=hf["kv_lora_rank"],
        qk_nope_head_dim=hf["qk_nope_head_dim"],
        qk_rope_head_dim=hf["qk_rope_head_dim"],
        v_head_dim=hf["v_head_dim"],
        n_routed_experts=hf["n_routed_experts"],
        n_shared_experts=hf["n_shared_experts"],
        num_experts_per_tok=hf["num_experts_per_tok"],
        moe_intermediate_size=hf["moe_intermediate_size"],
        scoring_func=hf.get("scoring_func", "softmax"),
        topk_method=hf.get("topk_method") or "greedy",
        n_group=hf.get("n_group") or 1,
        topk_group=hf.get("topk_group") or 1,
        norm_topk_prob=bool(hf.get("norm_topk_prob")),
        routed_scaling_factor=float(hf.get("routed_scaling_factor", 1.0)),
        rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
        rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
        rope_factor=float(rope.get("factor") or hf["max_position_embeddings"] / original) if yarn else 1.0,
        rope_original_max_position_embeddings=original,
        rope_beta_fast=float(rope.get("beta_fast") or 32.0),
        rope_beta_slow=float(rope.get("beta_slow") or 1.0),
        rope_mscale=float(rope.get("mscale") or 0.0) if yarn else 0.0,
        rope_mscale_all_dim=float(rope.get("mscale_all_dim") or 0.0) if yarn else 0.0,
        max_position_embeddings=hf.get("max_position_embeddings", 163840),
        tie_word_embeddings=hf.get("tie_word_embeddings", False),
        aux_loss_type=("sequence" if hf.get("seq_aux", True) else "global_batch") if aux_coef else "none",
        aux_loss_coef=float(aux_coef),
        initializer_range=hf.get("initializer_range", 0.02),
    )


def cfg_to_hf(cfg: DeepseekV2Cfg) -> dict:
    """Fields keep Hugging Face's names, so the export is the config itself plus the few that differ."""
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if cfg.rope_factor != 1.0:
        rope |= {
            "rope_type": "yarn",
            "factor": cfg.rope_factor,
            "original_max_position_embeddings": cfg.rope_original_max_position_embeddings,
            "beta_fast": cfg.rope_beta_fast,
            "beta_slow": cfg.rope_beta_slow,
            "mscale": cfg.rope_mscale,
            "mscale_all_dim": cfg.rope_mscale_all_dim,
        }
    same = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "family" and not k.startswith(("rope_", "aux_"))}
    return same | {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "q_lora_rank": cfg.q_lora_rank or None,
        "num_key_value_heads": cfg.num_attention_heads,  # MLA has no separate KV heads; HF's eager path reads it
        "moe_layer_freq": 1,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": rope,
        "aux_loss_alpha": cfg.aux_loss_coef if cfg.aux_loss_type != "none" else 0.0,
        "seq_aux": cfg.aux_loss_type == "sequence",
        "hidden_act": "silu",
        "attention_bias": False,
        "torch_dtype": "bfloat16",
    }


def state_dict_from_hf(hf_sd: dict[str, torch.Tensor], cfg: DeepseekV2Cfg) -> dict[str, torch.Tensor]:
    """Hub layout -> this file's layout: identical names, except routed experts stacked into [E, ...] tensors."""
    sd = {k: v for k, v in hf_sd.items() if ".mlp.experts." not in k}
    if cfg.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    for i in range(cfg.first_k_dense_replace, cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp.experts"
        experts = range(cfg.n_routed_experts)
        sd[f"{p}.gate_up_proj"] = torch.stack(
            [torch.cat([hf_sd[f"{p}.{e}.gate_proj.weight"], hf_sd[f"{p}.{e}.up_proj.weight"]]) for e in experts]
        )
        sd[f"{p}.down_proj"] = torch.stack([hf_sd[f"{p}.{e}.down_proj.weight"] for e in experts])
    return sd


def state_dict_to_hf(sd: dict[str, torch.Tensor], cfg: DeepseekV2Cfg) -> dict[str, torch.Tensor]:
    hf_sd = {k: v for k, v in sd.items() if ".mlp.experts." not in k}
    if cfg.tie_word_embeddings:
        hf_sd.pop("lm_head.weight", None)
    for i in range(cfg.first_k_dense_replace, cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp.experts"
        gate, up = sd[f"{p}.gate_up_proj"].chunk(2, dim=1)
        for e in range(cfg.n_routed_experts):
            hf_sd[f"{p}.{e}.gate_proj.weight"] = gate[e].contiguous()
            hf_sd[f"{p}.{e}.up_proj.weight"] = up[e].contiguous()
            hf_sd[f"{p}.{e}.down_proj.weight"] = sd[f"{p}.down_proj"][e].contiguous()
    return hf_sd
