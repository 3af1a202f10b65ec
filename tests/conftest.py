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
