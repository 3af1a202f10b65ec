"""GPT-OSS (gpt-oss-20b, gpt-oss-120b), self-contained.

Shape legend: B batch, S sequence, D hidden, H query heads, G key/value heads, Dh head dim, F = Dh/2 rotary
frequencies, E experts, K experts per token, I expert FFN width, T tokens (B*S), N routed copies (T*K), V vocab.

What sets GPT-OSS apart (OpenAI's model card and reference code, gpt_oss/torch/model.py): layers 0, 2, 4, ...
attend to a sliding window of the last `sliding_window` tokens and the odd layers to the whole prefix; each head
has a learned "sink" logit that takes part in the softmax but carries no value, so a head can attend to nothing;
the attention projections, router and experts have biases; the experts use a clamped SwiGLU; routing is top-k on
the logits, then a softmax over the K chosen ones.

Layer contract as in qwen3_moe.py: `forward_stage1` (norm, attention, norm, routing), `forward_stage3` (experts
on expert-grouped tokens), `forward_stage5` (weighted combine + residual); stages 2 and 4 are
`modules/expert_parallel.py`'s dispatch/combine (local permutation on one rank, all-to-all under EP);
`reference_forward` is the oracle. Under context parallelism the window and the sinks move into
`modules/ring_attention.py`, the window over global (zigzag) positions.
Attribute names and tensor layouts follow transformers' GptOss, which is also the Hub's bf16 on-disk layout:
experts keep [E, D, 2I] weights with gate and up columns interleaved. The released checkpoints store the experts
in MXFP4; importing those is refused with the command that dequantizes them.
Under training.precision = "fp8" (`precision.fp8`), the attention projections, the experts and the head run FP8
matmuls (operators/fp8_linear.py), each bias added in bf16 after its FP8 product. The released sizes (hidden and
expert width 2880 = 22.5 x 128) do not split into 128-wide blocks, so FP8 takes widths that do (checked at set-up).
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

from pithtrain.config import ConfigError, Positive, Range
from pithtrain.contexts import distributed, precision
from pithtrain.modules.expert_parallel import combine, dispatch
from pithtrain.modules.ring_attention import ring_attention
from pithtrain.operators.cross_entropy import linear_cross_entropy
from pithtrain.operators.fp8_linear import fp8_grouped_linear, fp8_linear
from pithtrain.operators.weight_cast import cast_weight


@dataclass
class GptOssCfg:
    family: Literal["gpt_oss"] = "gpt_oss"
    """Model family; selects this file."""
    vocab_size: Positive = 201088
    """Number of token ids; every id in the data must be below it."""
    hidden_size: Positive = 2880
    """Width D of the residual stream."""
    num_hidden_layers: Positive = 24
    """Number of decoder layers (all MoE); even layers use sliding-window attention, odd layers full attention."""
    num_attention_heads: Positive = 64
    """Query heads H."""
    num_key_value_heads: Positive = 8
    """Key/value heads G (grouped-query attention); must divide the query heads."""
    head_dim: Positive = 64
    """Width Dh of one attention head; even."""
    sliding_window: Positive = 128
    """Tokens a sliding-window layer attends to, the current one included."""
    num_local_experts: Positive = 32
    """Experts E per layer."""
    num_experts_per_tok: Positive = 4
    """Experts K each token is sent to."""
    intermediate_size: Positive = 2880
    """Hidden width I of one expert's clamped SwiGLU MLP."""
    swiglu_alpha: Annotated[float, Range(gt=0)] = 1.702
    """Sigmoid gain of the clamped SwiGLU: gate * sigmoid(alpha * gate)."""
    swiglu_limit: Annotated[float, Range(gt=0)] = 7.0
    """The SwiGLU clamps the gate from above and the up projection on both sides at this value."""
    rms_norm_eps: Annotated[float, Range(gt=0)] = 1e-5
    """Epsilon added to the mean square inside RMSNorm."""
    rope_theta: Annotated[float, Range(gt=0)] = 150000.0
    """RoPE base frequency."""
    rope_factor: Annotated[float, Range(ge=1)] = 32.0
    """YaRN context-extension factor; 1 means plain RoPE."""
    rope_original_max_position_embeddings: Positive = 4096
    """YaRN: the context length of pre-training, before extension."""
    rope_beta_fast: Annotated[float, Range(gt=0)] = 32.0
    """YaRN: frequencies turning more often than this over the original context are kept as they are."""
    rope_beta_slow: Annotated[float, Range(gt=0)] = 1.0
    """YaRN: frequencies turning less often than this over the original context are divided by rope_factor."""
    max_position_embeddings: Positive = 131072
    """Longest sequence the model is meant for (recorded in exported configs)."""
    tie_word_embeddings: bool = False
    """Share the input embedding with the output head."""
    aux_loss_type: Literal["global_batch", "sequence", "none"] = "global_batch"
    """Load-balancing loss: over all tokens of the micro-batch, per sequence (averaged), or off."""
    aux_loss_coef: Annotated[float, Range(ge=0)] = 1e-3
    """Weight of the load-balancing loss."""
    initializer_range: Annotated[float, Range(gt=0)] = 0.02
    """Standard deviation of the normal init of every matrix."""

    def __post_init__(self):
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"model.num_key_value_heads = {self.num_key_value_heads} must divide "
                f"model.num_attention_heads = {self.num_attention_heads}."
            )
        if self.head_dim % 2:
            raise ConfigError(f"model.head_dim = {self.head_dim} must be even (RoPE rotates pairs).")
        if self.num_experts_per_tok > self.num_local_experts:
            raise ConfigError(
                f"model.num_experts_per_tok = {self.num_experts_per_tok} must be at most "
                f"model.num_local_experts = {self.num_local_experts}."
            )


class GptOssRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * x32).to(x.dtype)  # the weight multiplies in fp32, unlike Llama-style norms


def rope_cos_sin(position_ids_BS: torch.Tensor, cfg: GptOssCfg):
    """cos/sin tables (B, S, F) in fp32 with YaRN (Peng et al. 2023, sec. 3.2-3.4): frequencies that turn more than
    beta_fast times over the original context are kept, those turning fewer than beta_slow times are divided by the
    factor, with a linear ramp in between (not rounded to whole dims, as in OpenAI's code); cos and sin are scaled
    by the attention temperature 0.1 * ln(factor) + 1. Matches transformers' `_compute_yarn_parameters`."""
    dim, theta, factor = cfg.head_dim, cfg.rope_theta, cfg.rope_factor
    original = cfg.rope_original_max_position_embeddings
    pos_freqs_F = theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)
    inv_freq_F, scale = 1.0 / pos_freqs_F, 1.0
    if factor > 1.0:

        def correction_dim(rotations: float) -> float:  # the dim index that turns `rotations` times in the context
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low, high = max(correction_dim(cfg.rope_beta_fast), 0), min(correction_dim(cfg.rope_beta_slow), dim - 1)
        ramp_F = ((torch.arange(dim // 2, dtype=torch.float) - low) / (high - low if high != low else 1e-3)).clamp(0, 1)
        inv_freq_F = 1.0 / (factor * pos_freqs_F) * ramp_F + inv_freq_F * (1 - ramp_F)
        scale = 0.1 * math.log(factor) + 1.0
    freqs_BSF = position_ids_BS[..., None].float() * inv_freq_F.to(position_ids_BS.device)
    return freqs_BSF.cos() * scale, freqs_BSF.sin() * scale


def apply_rope(x_BHSDh: torch.Tensor, cos_BSF: torch.Tensor, sin_BSF: torch.Tensor) -> torch.Tensor:
    """Rotate the pairs (x[f], x[f + F]) by frequency f (the two-halves layout)."""
    x1, x2 = x_BHSDh.chunk(2, dim=-1)
    cos, sin = cos_BSF[:, None].to(x_BHSDh.dtype), sin_BSF[:, None].to(x_BHSDh.dtype)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def attention_mask(S: int, window: int | None, device) -> torch.Tensor:
    """allowed_SS[q, k]: causal, and within the last `window` keys (the query's own included) if given."""
    q_idx, k_idx = torch.arange(S, device=device)[:, None], torch.arange(S, device=device)[None]
    return (k_idx <= q_idx) & (k_idx > q_idx - window) if window is not None else k_idx <= q_idx


def sink_attention(q_BHSDh, k_BHSDh, v_BHSDh, sinks_H, window: int | None, scale: float) -> torch.Tensor:
    """Attention whose softmax also holds one learned logit per head (the sink) with no value behind it, so a head
    can attend to nothing. SDPA has no sinks, so the sink becomes one extra key with value 0 that every query sees:
    an extra channel holds sink_h / scale in each query of head h, 1 in the sink key and 0 in the real keys, so the
    sink key's logit is exactly sink_h. This keeps SDPA's fused kernels (memory O(S), not O(S^2) as in
    `sink_attention_reference`); the channels are padded to a multiple of 8 for them."""
    B, H, S, Dh = q_BHSDh.shape
    sink_BHS1 = (sinks_H / scale).to(q_BHSDh.dtype).view(1, H, 1, 1).expand(B, H, S, 1)
    q_BHSX = F.pad(torch.cat((q_BHSDh, sink_BHS1), dim=-1), (0, 7))
    k_BHSX = torch.cat((F.pad(k_BHSDh, (0, 8)), F.pad(k_BHSDh.new_ones(B, H, 1, 1), (Dh, 7))), dim=2)
    v_BHSDh = torch.cat((v_BHSDh, v_BHSDh.new_zeros(B, H, 1, Dh)), dim=2)
    allowed_SS = F.pad(attention_mask(S, window, q_BHSDh.device), (0, 1), value=True)  # the sink: always seen
    return F.scaled_dot_product_attention(q_BHSX, k_BHSX, v_BHSDh, attn_mask=allowed_SS, scale=scale)


def sink_attention_reference(q_BHSDh, k_BHSDh, v_BHSDh, sinks_H, window: int | None, scale: float) -> torch.Tensor:
    """The oracle of `sink_attention`, as written in transformers' and OpenAI's code: softmax over the masked
    scores with the sink logit concatenated (fp32), then drop the sink's column."""
    B, H, S, _ = q_BHSDh.shape
    scores_BHSS = (q_BHSDh @ k_BHSDh.transpose(-2, -1)).float() * scale
    scores_BHSS = scores_BHSS.masked_fill(~attention_mask(S, window, q_BHSDh.device), float("-inf"))
    sink_BHS1 = sinks_H.float().view(1, H, 1, 1).expand(B, H, S, 1)
    probs_BHSS = torch.cat((scores_BHSS, sink_BHS1), dim=-1).softmax(-1)[..., :-1]
    return probs_BHSS.to(v_BHSDh.dtype) @ v_BHSDh


def project(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """A biased attention projection: under training.precision = "fp8" an FP8 matmul (operators/fp8_linear.py,
    which has no bias) with the bias added in bf16 after it."""
    return fp8_linear(x, linear.weight) + linear.bias.to(torch.bfloat16) if precision.fp8 else linear(x)


class GptOssAttention(nn.Module):
    """Grouped-query attention with biases and per-head sinks; sliding-window on even layers."""

    def __init__(self, cfg: GptOssCfg, layer_idx: int):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        self.q_proj = nn.Linear(cfg.hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, cfg.hidden_size, bias=True)
        self.sinks = nn.Parameter(torch.empty(self.num_heads))
        self.sliding_window = cfg.sliding_window if layer_idx % 2 == 0 else None

    def forward(self, x_BSD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, S, _ = x_BSD.shape
        H, G, Dh = self.num_heads, self.num_kv_heads, self.head_dim
        q_BHSDh = apply_rope(project(self.q_proj, x_BSD).view(B, S, H, Dh).transpose(1, 2), cos, sin)
        k_BGSDh = apply_rope(project(self.k_proj, x_BSD).view(B, S, G, Dh).transpose(1, 2), cos, sin)
        v_BGSDh = project(self.v_proj, x_BSD).view(B, S, G, Dh).transpose(1, 2)
        if distributed.cp_size > 1:  # this rank holds a zigzag shard of each sequence
            window, sinks_H = self.sliding_window, self.sinks
            o_BHSDh = ring_attention(q_BHSDh, k_BGSDh, v_BGSDh, distributed.cp_group, Dh**-0.5, window, sinks_H)
        else:
            k_BHSDh, v_BHSDh = k_BGSDh.repeat_interleave(H // G, dim=1), v_BGSDh.repeat_interleave(H // G, dim=1)
            o_BHSDh = sink_attention(q_BHSDh, k_BHSDh, v_BHSDh, self.sinks, self.sliding_window, Dh**-0.5)
        return project(self.o_proj, o_BHSDh.transpose(1, 2).reshape(B, S, H * Dh))


class GptOssExperts(nn.Module):
    """This rank's clamped-SwiGLU experts with biases as stacked weights (dim 0 = local expert, biases too; under
    expert parallelism, rank r holds global experts r*E/EP ... (r+1)*E/EP - 1), in transformers' layout:
    gate_up_proj [E, D, 2I] with gate and up columns interleaved, down_proj [E, I, D]. `forward` runs them with two
    grouped matmuls."""

    def __init__(self, cfg: GptOssCfg):
        super().__init__()
        E, D, I = cfg.num_local_experts // distributed.ep_size, cfg.hidden_size, cfg.intermediate_size
        self.expert_offset = distributed.ep_rank * E
        self.gate_up_proj = nn.Parameter(torch.empty(E, D, 2 * I))
        self.gate_up_proj_bias = nn.Parameter(torch.empty(E, 2 * I))
        self.down_proj = nn.Parameter(torch.empty(E, I, D))
        self.down_proj_bias = nn.Parameter(torch.empty(E, D))
        self.alpha, self.limit = cfg.swiglu_alpha, cfg.swiglu_limit

    def swiglu(self, gate_up_N2I: torch.Tensor) -> torch.Tensor:
        """OpenAI's clamped SwiGLU: (clamp(up) + 1) * g * sigmoid(alpha * g), g = gate clamped from above."""
        gate_NI = gate_up_N2I[..., ::2].clamp(max=self.limit)
        up_NI = gate_up_N2I[..., 1::2].clamp(min=-self.limit, max=self.limit)
        return (up_NI + 1) * gate_NI * torch.sigmoid(gate_NI * self.alpha)

    def forward(self, x_ND: torch.Tensor, tokens_per_expert_E: torch.Tensor) -> torch.Tensor:
        """x_ND holds the routed copies sorted by expert; tokens_per_expert_E gives each expert's slice."""
        offsets_E = torch.cumsum(tokens_per_expert_E, 0).to(torch.int32)
        E, N = tokens_per_expert_E.shape[0], x_ND.shape[0]
        # Each row's expert, for the biases; output_size avoids a device sync.
        expert_N = torch.repeat_interleave(torch.arange(E, device=x_ND.device), tokens_per_expert_E, output_size=N)
        if precision.fp8:  # operators/fp8_linear.py; weights stored [E, K, N]; biases added in bf16 after the products
            gate_up_N2I = fp8_grouped_linear(x_ND, self.gate_up_proj, offsets_E, weight_kn=True)
            h_NI = self.swiglu(gate_up_N2I + self.gate_up_proj_bias.to(torch.bfloat16)[expert_N])
            y_ND = fp8_grouped_linear(h_NI, self.down_proj, offsets_E, weight_kn=True)
            return y_ND + self.down_proj_bias.to(torch.bfloat16)[expert_N]
        x_ND = x_ND.to(autocast_dtype(x_ND))  # autocast does not cover grouped matmuls
        gate_up_N2I = torch._grouped_mm(x_ND, cast_weight(self.gate_up_proj, x_ND.dtype), offs=offsets_E)
        h_NI = self.swiglu(gate_up_N2I + self.gate_up_proj_bias.to(x_ND.dtype)[expert_N])
        y_ND = torch._grouped_mm(h_NI, cast_weight(self.down_proj, h_NI.dtype), offs=offsets_E)
        return y_ND + self.down_proj_bias.to(y_ND.dtype)[expert_N]

    def reference_forward(self, x_TD: torch.Tensor, topk_ids_TK: torch.Tensor) -> torch.Tensor:
        """Per-expert loop (the test oracle, one rank): y_TKD, each token's output from each chosen expert."""
        assert distributed.ep_size == 1, "the per-expert loop needs every expert on this rank"
        T, K = topk_ids_TK.shape
        y_TKD = x_TD.new_zeros(T, K, x_TD.shape[-1])
        for e in range(self.gate_up_proj.shape[0]):
            token_idx, k_idx = torch.where(topk_ids_TK == e)
            gate_up = x_TD[token_idx] @ self.gate_up_proj[e].to(x_TD.dtype) + self.gate_up_proj_bias[e].to(x_TD.dtype)
            h = self.swiglu(gate_up)
            y_TKD[token_idx, k_idx] = (h @ self.down_proj[e].to(h.dtype) + self.down_proj_bias[e]).to(y_TKD.dtype)
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


class GptOssMLP(nn.Module):
    shared_experts = None  # no module called directly in stage 1 (models.MoeBlock)

    def __init__(self, cfg: GptOssCfg):
        super().__init__()
        self.cfg = cfg
        self.router = nn.Linear(cfg.hidden_size, cfg.num_local_experts, bias=True)
        self.experts = GptOssExperts(cfg)

    def route(self, x_BSD: torch.Tensor, aux_loss_scale: float):
        """Top-k on the logits, softmax over the K chosen (fp32). The load-balancing loss uses the softmax over
        all experts, as transformers' does. Returns (topk_ids_TK, topk_w_TK)."""
        B, S, D = x_BSD.shape
        logits_BSE = F.linear(x_BSD, self.router.weight.to(x_BSD.dtype), self.router.bias.to(x_BSD.dtype)).float()
        topk_logits_BSK, topk_ids_BSK = torch.topk(logits_BSE, self.cfg.num_experts_per_tok, dim=-1)
        topk_w_BSK = topk_logits_BSK.softmax(-1)
        if self.cfg.aux_loss_type != "none" and self.training and aux_loss_scale > 0:
            aux = load_balancing_loss(logits_BSE.softmax(-1), topk_ids_BSK, self.cfg.aux_loss_type)
            topk_w_BSK = AttachAuxLoss.apply(topk_w_BSK, aux * aux_loss_scale)
        K = self.cfg.num_experts_per_tok
        return topk_ids_BSK.reshape(B * S, K), topk_w_BSK.reshape(B * S, K)


class GptOssDecoderLayer(nn.Module):
    is_moe = True

    def __init__(self, cfg: GptOssCfg, layer_idx: int):
        super().__init__()
        self.num_experts = cfg.num_local_experts
        self.input_layernorm = GptOssRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = GptOssAttention(cfg, layer_idx)
        self.post_attention_layernorm = GptOssRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = GptOssMLP(cfg)

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
        """The layer's eager oracle (one rank), sharing no stage code with the fast path: attention through
        `sink_attention_reference` with the projections written out, routing by a full sort of the logits, each
        routed copy through its expert's weights gathered per token, and the combine as a loop over the K choices;
        matmuls in the autocast dtype."""
        cfg, attn, experts, dtype = self.mlp.cfg, self.self_attn, self.mlp.experts, autocast_dtype(x_BSD)
        a_BSD = self.input_layernorm(x_BSD)
        B, S, D = a_BSD.shape
        H, G, Dh = attn.num_heads, attn.num_kv_heads, attn.head_dim

        def heads(linear, count):  # (B, count, S, Dh), rotated by the two-halves layout unless it is v
            return F.linear(a_BSD, linear.weight, linear.bias).view(B, S, count, Dh).transpose(1, 2)

        def rotate(t_BXSDh):
            c, s = cos[:, None].to(t_BXSDh.dtype), sin[:, None].to(t_BXSDh.dtype)
            t1, t2 = t_BXSDh[..., : Dh // 2], t_BXSDh[..., Dh // 2 :]
            return torch.cat((t1 * c - t2 * s, t2 * c + t1 * s), dim=-1)

        q_BHSDh = rotate(heads(attn.q_proj, H))
        k_BHSDh = rotate(heads(attn.k_proj, G)).repeat_interleave(H // G, dim=1)
        v_BHSDh = heads(attn.v_proj, G).repeat_interleave(H // G, dim=1)
        o_BHSDh = sink_attention_reference(q_BHSDh, k_BHSDh, v_BHSDh, attn.sinks, attn.sliding_window, Dh**-0.5)
        h_BSD = x_BSD + F.linear(o_BHSDh.transpose(1, 2).reshape(B, S, H * Dh), attn.o_proj.weight, attn.o_proj.bias)
        n_TD, K = self.post_attention_layernorm(h_BSD).reshape(B * S, D), cfg.num_experts_per_tok
        router = self.mlp.router
        logits_TE = F.linear(n_TD.to(dtype), router.weight.to(dtype), router.bias.to(dtype)).float()
        top_TK, ids_TK = (t[:, :K] for t in logits_TE.sort(-1, descending=True))
        w_TK = top_TK.softmax(-1)
        if cfg.aux_loss_type != "none" and self.training and aux_loss_scale > 0:
            aux = load_balancing_loss(logits_TE.softmax(-1).view(B, S, -1), ids_TK.view(B, S, K), cfg.aux_loss_type)
            w_TK = AttachAuxLoss.apply(w_TK, aux * aux_loss_scale)
        x_TD, out_TD = n_TD.to(dtype), 0
        for k in range(K):
            e_T = ids_TK[:, k]
            gate_up_TJ = torch.einsum("td,tdj->tj", x_TD, experts.gate_up_proj[e_T].to(dtype))
            h_TI = experts.swiglu(gate_up_TJ + experts.gate_up_proj_bias[e_T].to(dtype))
            y_TD = torch.einsum("ti,tid->td", h_TI, experts.down_proj[e_T].to(dtype))
            out_TD = out_TD + (y_TD + experts.down_proj_bias[e_T].to(dtype)) * w_TK[:, k, None].to(dtype)
        return h_BSD + out_TD.view(B, S, D)


def autocast_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matmuls run in here: autocast's when it is on (ops it does not cover are cast by hand)."""
    on = torch.is_autocast_enabled(x.device.type)
    return torch.get_autocast_dtype(x.device.type) if on else x.dtype


class GptOssLMHead(nn.Linear):
    """The output head. With labels it returns the summed token cross-entropy, computed a chunk of tokens at
    a time (operators/cross_entropy.py); going through this module's forward lets FSDP gather its weight."""

    def forward(self, n_TD: torch.Tensor, labels_T: torch.Tensor | None = None) -> torch.Tensor:
        if labels_T is None:
            return F.linear(n_TD, self.weight)
        dtype = autocast_dtype(n_TD)
        with torch.autocast(n_TD.device.type, enabled=False):  # the weight is cast inside, its gradient summed in fp32
            return linear_cross_entropy(n_TD.to(dtype), self.weight, labels_T, fp8=precision.fp8)


class GptOssModel(nn.Module):
    def __init__(self, cfg: GptOssCfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        # Keyed by the global layer index: a pipeline stage keeps only its own layers, under the same names.
        self.layers = nn.ModuleDict({str(i): GptOssDecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)})
        self.norm = GptOssRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class GptOssForCausalLM(nn.Module):
    def __init__(self, cfg: GptOssCfg):
        super().__init__()
        self.cfg = cfg
        self.model = GptOssModel(cfg)
        self.lm_head = GptOssLMHead(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        if not any(p.is_meta for p in self.parameters()):
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """Each tensor (each expert, for stacked experts) draws from a generator seeded by its name, so
        any rank can initialise exactly its own slice of the model, and every mesh starts identical.
        Norms start at one and biases at zero; matrices, embeddings and the sinks are normal."""
        base = torch.initial_seed()

        def normal_(t: torch.Tensor, key: str):
            g = torch.Generator(device=t.device).manual_seed(base + zlib.crc32(key.encode()))
            t.normal_(0.0, self.cfg.initializer_range, generator=g)

        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith("bias"):
                p.zero_()
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


def flops_per_token(cfg: GptOssCfg, seq_len: int) -> float:
    """Training FLOPs per token: 6 x (active matmul parameters) plus causal attention scores.

    Matmul parameters per layer: q/k/v/o projections, the router, and K experts of 3*D*I each; plus the
    output head. Attention: QK^T and PV cost 2 * 2 * H * Dh FLOPs per (query, key) pair forward, 3x that for
    training. A query sees on average S/2 keys in a full layer and W * (1 - W / 2S) in a sliding-window layer
    of window W < S; half the layers (rounded up) slide.
    """
    D, H, G, Dh, W = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.sliding_window
    attn_params = D * H * Dh * 2 + D * G * Dh * 2
    moe_params = D * cfg.num_local_experts + cfg.num_experts_per_tok * 3 * D * cfg.intermediate_size
    matmul_params = cfg.num_hidden_layers * (attn_params + moe_params) + D * cfg.vocab_size
    sliding = (cfg.num_hidden_layers + 1) // 2
    full_keys, window_keys = seq_len / 2, (W * (1 - W / (2 * seq_len)) if W < seq_len else seq_len / 2)
    keys = sliding * window_keys + (cfg.num_hidden_layers - sliding) * full_keys
    return 6.0 * matmul_params + 12.0 * H * Dh * keys


# ---- Hugging Face conversion: transformers' bf16/fp32 layout equals this file's; MXFP4 is refused ----

HF_ROPE_KEYS = {"rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast",
                "beta_slow", "truncate"}  # fmt: skip
MXFP4_HELP = (
    "pithtrain imports bf16/fp32 weights only. Dequantize once with transformers: "
    "GptOssForCausalLM.from_pretrained(src, quantization_config=Mxfp4Config(dequantize=True), "
    "dtype=torch.bfloat16).save_pretrained(dst), then import dst."
)


def cfg_from_hf(hf: dict) -> GptOssCfg:
    quant = (hf.get("quantization_config") or {}).get("quant_method")
    if quant is not None:
        raise ConfigError(f"this GPT-OSS checkpoint is quantized (quantization_config.quant_method = {quant!r}); "
                          f"MXFP4 import is not supported. {MXFP4_HELP}")  # fmt: skip
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    yarn = rope_type == "yarn"
    original = rope.get("original_max_position_embeddings", 4096)
    if rope_type not in ("default", "yarn") or set(rope) - HF_ROPE_KEYS or (yarn and rope.get("truncate", True)):
        raise ConfigError(f"rope_parameters = {rope}: pithtrain's gpt_oss supports default and yarn RoPE with "
                          f"the keys {sorted(HF_ROPE_KEYS)} and truncate false.")  # fmt: skip
    n_layers = hf["num_hidden_layers"]
    alternating = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
    if hf.get("layer_types", alternating) != alternating:
        raise ConfigError(f"layer_types = {hf['layer_types']}: pithtrain's gpt_oss needs sliding-window attention "
                          "on even layers and full attention on odd layers, as in the released models.")  # fmt: skip
    return GptOssCfg(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_hidden_layers=n_layers,
        num_attention_heads=hf["num_attention_heads"],
        num_key_value_heads=hf["num_key_value_heads"],
        head_dim=hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
        sliding_window=hf["sliding_window"],
        num_local_experts=hf["num_local_experts"],
        num_experts_per_tok=hf.get("num_experts_per_tok") or hf["experts_per_token"],
        intermediate_size=hf["intermediate_size"],
        swiglu_alpha=float(hf.get("swiglu_alpha", 1.702)),
        swiglu_limit=float(hf.get("swiglu_limit", 7.0)),
        rms_norm_eps=hf.get("rms_norm_eps", 1e-5),
        rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 150000.0))),
        rope_factor=float(rope.get("factor") or hf["max_position_embeddings"] / original) if yarn else 1.0,
        rope_original_max_position_embeddings=original,
        rope_beta_fast=float(rope.get("beta_fast") or 32.0),
        rope_beta_slow=float(rope.get("beta_slow") or 1.0),
        max_position_embeddings=hf.get("max_position_embeddings", 131072),
        tie_word_embeddings=hf.get("tie_word_embeddings", False),
        aux_loss_coef=float(hf.get("router_aux_loss_coef", 1e-3)),
        initializer_range=hf.get("initializer_range", 0.02),
    )


def cfg_to_hf(cfg: GptOssCfg) -> dict:
    """Fields keep Hugging Face's names, so the export is the config itself plus the few that differ."""
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if cfg.rope_factor != 1.0:
        rope |= {
            "rope_type": "yarn",
            "factor": cfg.rope_factor,
            "original_max_position_embeddings": cfg.rope_original_max_position_embeddings,
            "beta_fast": cfg.rope_beta_fast,
            "beta_slow": cfg.rope_beta_slow,
            "truncate": False,
        }
    same = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "family" and not k.startswith(("rope_", "aux_"))}
    return same | {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(cfg.num_hidden_layers)],
        "rope_theta": cfg.rope_theta,
        "rope_parameters": rope,
        "router_aux_loss_coef": cfg.aux_loss_coef,
        "hidden_act": "silu",
        "attention_bias": True,
        "torch_dtype": "bfloat16",
    }


def state_dict_from_hf(hf_sd: dict[str, torch.Tensor], cfg: GptOssCfg) -> dict[str, torch.Tensor]:
    """Hub (bf16) layout -> this file's layout: the same names and shapes."""
    quantized = [k for k in hf_sd if k.endswith(("_blocks", "_scales"))]
    if quantized:
        raise ConfigError(f"the weights hold MXFP4 tensors ({quantized[0]}, ...); MXFP4 import is not supported. "
                          f"{MXFP4_HELP}")  # fmt: skip
    sd = dict(hf_sd)
    if cfg.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    return sd


def state_dict_to_hf(sd: dict[str, torch.Tensor], cfg: GptOssCfg) -> dict[str, torch.Tensor]:
    hf_sd = dict(sd)
    if cfg.tie_word_embeddings:
        hf_sd.pop("lm_head.weight", None)
    return hf_sd
