"""The benchmark's input pipeline, the same for every side: uniformly random token ids, generated in memory before
the first step (benchmarks/NOTES.md, Method). Each side's driver hands them to its trainer's own batching."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

INPUT_PIPELINE = "synthetic-in-memory"


def token_rows(vocab_size: int, rows: int, seq_len: int, seed: int) -> "torch.Tensor":
    """[rows, seq_len + 1] int64 token ids, uniform over the vocabulary: row r's first seq_len ids are the inputs of
    one sequence, its last seq_len ids the labels."""
    import torch  # here, so throughput.py can say "no torch" in one line before anything imports it

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (rows, seq_len + 1), generator=g)
