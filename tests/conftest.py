import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TINY_TOKENS = REPO / "examples" / "data" / "tiny" / "tokens"
TINY_TOKENIZER = REPO / "examples" / "data" / "tiny" / "tokenizer"
sys.path.insert(0, str(REPO))

TINY_MODEL = """
[model]
family = "qwen3_moe"
vocab_size = 2048
hidden_size = 32
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
head_dim = 8
num_experts = 4
num_experts_per_tok = 2
moe_intermediate_size = 16
rope_theta = 10000.0
"""


@pytest.fixture
def tiny_config(tmp_path):
    """Write a tiny run config (shipped corpus, 2 layers of 4 experts) and return its path."""

    def make(max_steps=4, extra=""):
        text = (
            f'run_dir = "{tmp_path / "run"}"\n{TINY_MODEL}\n'
            + f"""
[training]
max_steps = {max_steps}
global_batch_size = 4
micro_batch_size = 2
lr = 1e-2
min_lr = 1e-3
warmup_steps = 2
device = "cpu"

[data]
kind = "tokens"
path = "{TINY_TOKENS}"
seq_len = 32
"""
            + extra
        )
        path = tmp_path / "run.toml"
        path.write_text(text)
        return path

    return make


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch):
    """Same seed for every test, and process-wide precision state that a training in a test sets (`setup`
    writes `precision.fp8`) is put back afterwards, so no test sees another's."""
    from pithtrain.contexts import precision

    torch.manual_seed(0)
    monkeypatch.setattr(precision, "fp8", False)
    yield


@pytest.fixture(scope="module")
def megatron_pin(tmp_path_factory) -> Path:
    """One materialized Megatron-LM pin per test module, which copies it per case (git mode: the mirror or carried
    archive, else a fetch); skips where there is none and no network, or megatron.training's imports are missing."""
    from ate_bench.workspace import DEFAULT_CACHE_DIR, NetworkError, materialize

    dest = tmp_path_factory.mktemp("megatron") / "pin"
    try:
        materialize("megatron-lm", dest, mode="git", skills=False, cache_dir=DEFAULT_CACHE_DIR)
    except NetworkError as e:
        pytest.skip(f"no Megatron-LM pin here and no network to fetch it: {str(e).splitlines()[0]}")
    for module in ("six", "pydantic"):  # what megatron.training imports beyond torch
        pytest.importorskip(module, reason=f"megatron.training imports {module}: pip install {module}")
    return dest
