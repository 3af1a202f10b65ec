"""Strict config loading: each mistake names the key, the value and what is allowed."""

import dataclasses
import typing

import pytest
from conftest import REPO

from pithtrain.config import ConfigError, apply_overrides, load_dataclass
from pithtrain.models.deepseek_v2 import DeepseekV2Cfg
from pithtrain.models.gpt_oss import GptOssCfg
from pithtrain.models.qwen3_moe import Qwen3MoeCfg
from pithtrain.tasks.pretrain_lm import PretrainLMCfg, load_pretrain_cfg


def knobs(cls, prefix=""):
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += knobs(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def test_knob_set_is_frozen():
    """Adding or removing a config knob is a deliberate diff of this list."""
    assert knobs(PretrainLMCfg) == [
        "run_dir", "model",
        "training.max_steps", "training.global_batch_size", "training.micro_batch_size", "training.lr",
        "training.min_lr", "training.warmup_steps", "training.lr_schedule", "training.wsd_decay_fraction",
        "training.weight_decay", "training.adam_beta1", "training.adam_beta2", "training.adam_eps",
        "training.grad_clip", "training.seed", "training.device", "training.precision", "training.compile",
        "data.kind", "data.path", "data.seq_len",
        "checkpoint.dir", "checkpoint.interval", "checkpoint.keep_last", "checkpoint.resume", "checkpoint.init_from",
        "logging.log_interval", "logging.peak_tflops", "logging.tensorboard", "logging.wandb_project",
        "distributed.pipeline_parallel_size", "distributed.context_parallel_size",
        "distributed.expert_parallel_size", "distributed.hsdp", "distributed.timeout_s",
    ]  # fmt: skip
    assert knobs(Qwen3MoeCfg) == [
        "family", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob", "rms_norm_eps",
        "rope_theta", "max_position_embeddings", "tie_word_embeddings", "aux_loss_type", "aux_loss_coef",
        "initializer_range", "force_balanced_routing",
    ]  # fmt: skip


def test_deepseek_v2_knob_set_is_frozen():
    assert knobs(DeepseekV2Cfg) == [
        "family", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "first_k_dense_replace",
        "num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "scoring_func",
        "topk_method", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor", "rms_norm_eps",
        "rope_theta", "rope_factor", "rope_original_max_position_embeddings", "rope_beta_fast", "rope_beta_slow",
        "rope_mscale", "rope_mscale_all_dim", "max_position_embeddings", "tie_word_embeddings", "aux_loss_type",
        "aux_loss_coef", "initializer_range",
    ]  # fmt: skip


def test_gpt_oss_knob_set_is_frozen():
    assert knobs(GptOssCfg) == [
        "family", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "sliding_window", "num_local_experts", "num_experts_per_tok", "intermediate_size", "swiglu_alpha",
        "swiglu_limit", "rms_norm_eps", "rope_theta", "rope_factor", "rope_original_max_position_embeddings",
        "rope_beta_fast", "rope_beta_slow", "max_position_embeddings", "tie_word_embeddings", "aux_loss_type",
        "aux_loss_coef", "initializer_range",
    ]  # fmt: skip


def test_loads_example(tiny_config):
    cfg = load_pretrain_cfg(tiny_config(), ["training.max_steps=7", "data.seq_len=16"])
    assert cfg.training.max_steps == 7 and cfg.data.seq_len == 16 and cfg.model.num_experts == 4


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.max_stepz=3", "unknown config key 'training.max_stepz'. Allowed keys here:"),
        ("training.max_steps=0", "config key 'training.max_steps' = 0 is out of range: allowed >= 1"),
        (
            'training.max_steps="10"',
            "config key 'training.max_steps' = '10' has the wrong type: expected int",
        ),
        ("training.max_steps=true", "config key 'training.max_steps' = True has the wrong type"),
        (
            "training.lr_schedule=linear",
            "config key 'training.lr_schedule' = 'linear' is not allowed: use one of",
        ),
        ("model.family=llama", "model.family = 'llama' is unknown. Known families: qwen3_moe"),
        (
            "model.num_key_value_heads=3",
            "model.num_key_value_heads = 3 must divide model.num_attention_heads = 4",
        ),
        ("training.micro_batch_size=3", "training.global_batch_size = 4 is not a multiple of"),
        ("bogus=1", "unknown config key 'bogus'"),
    ],
)
def test_bad_values_are_named(tiny_config, override, expected):
    with pytest.raises(ConfigError) as e:
        load_pretrain_cfg(tiny_config(), [override])
    assert expected in str(e.value)


def test_float_accepts_int_but_int_rejects_float():
    assert load_dataclass(Qwen3MoeCfg, {"rope_theta": 10000}).rope_theta == 10000.0
    with pytest.raises(ConfigError, match="'hidden_size' = 2.5 has the wrong type"):
        load_dataclass(Qwen3MoeCfg, {"hidden_size": 2.5})


def test_override_parsing():
    table = {}
    apply_overrides(table, ["a.b=3", "a.c=hello", "a.d=[1, 2]", 'a.e="quoted"'])
    assert table == {"a": {"b": 3, "c": "hello", "d": [1, 2], "e": "quoted"}}
    with pytest.raises(ConfigError, match="malformed"):
        apply_overrides(table, ["nokey"])


def test_malformed_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[training\nmax_steps = 3\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_pretrain_cfg(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_pretrain_cfg(tmp_path / "missing.toml")


@pytest.mark.parametrize("example", sorted(p.name for p in (REPO / "examples").glob("*.toml")))
def test_every_example_config_loads(example):
    cfg = load_pretrain_cfg(REPO / "examples" / example)
    prefix = {"qwen3": "qwen3_moe", "deepseek": "deepseek_v2", "gpt": "gpt_oss"}[example.split("-")[0]]
    assert cfg.model.family == prefix
