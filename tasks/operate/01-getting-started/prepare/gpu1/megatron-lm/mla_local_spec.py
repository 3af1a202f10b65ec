"""Megatron-Core's own modules for multi-latent attention without Transformer Engine, read by the provided
MODEL_ARGS through `--spec mla_local_spec block_spec` (pretrain_gpt.py imports it from the workspace root).

At the pinned Megatron-LM (3bec9aa), MLASelfAttention hands its core attention `k_channels` and `v_channels`, which
the local DotProductAttention does not take, so `--transformer-impl local` cannot build an MLA model. This is the
spec that --transformer-impl local would build (get_gpt_decoder_block_spec without Transformer Engine: one dense
layer, then MoE layers), with a DotProductAttention that takes those two arguments and sizes its output by v_channels.
Without Transformer Engine, megatron.core.extensions.transformer_engine still imports (it puts a MagicMock in TE's
place), so multi_latent_attention takes HAVE_TE as true and its isinstance(..., TELinear) check (TELinear then is a
mock, not a class) raises TypeError while building the layer: its HAVE_TE is set false here when TELinear is no class.
And moe_utils.RouterGatingLinearFunction reads te_general_gemm, which moe_utils defines only when Transformer Engine
imports (NameError at every router's forward): it is defined here as None, which takes its torch.mm path.
"""

import megatron.core.transformer.moe.moe_utils as moe_utils
import megatron.core.transformer.multi_latent_attention as mla
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
from megatron.core.transformer.dot_product_attention import DotProductAttention
from megatron.training import get_args
from megatron.training.arguments import core_transformer_config_from_args


class MLADotProductAttention(DotProductAttention):
    """DotProductAttention with MLA's head sizes: queries and keys of k_channels, values of v_channels."""

    def __init__(self, *args, k_channels=None, v_channels=None, **kwargs):
        super().__init__(*args, **kwargs)
        if v_channels is not None:
            self.hidden_size_per_partition = v_channels * self.num_attention_heads_per_partition


if not isinstance(mla.TELinear, type):  # Transformer Engine is absent
    mla.HAVE_TE = False
if not hasattr(moe_utils, "te_general_gemm"):
    moe_utils.te_general_gemm = None

_args = get_args()
block_spec = get_gpt_decoder_block_spec(
    core_transformer_config_from_args(_args),
    use_transformer_engine=False,
    normalization=_args.normalization,
    qk_l2_norm=_args.qk_l2_norm,
)
for _layer in block_spec.layer_specs:
    _layer.submodules.self_attention.submodules.core_attention = MLADotProductAttention
