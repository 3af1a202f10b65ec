"""Training data: packed token shards (memory-mapped) or synthetic tokens, and a resumable sampler.

On-disk format written by `pithtrain tokenize`: a directory with `index.json` and flat binary
files of token ids (documents concatenated, each followed by the end-of-sequence id). A sample is a
window of seq_len + 1 tokens inside one shard; inputs are its first seq_len tokens, labels its last.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from pithtrain.config import ConfigError, Positive, UserInputError

TOKENS_FORMAT = "pithtrain-tokens-v1"


class DataError(UserInputError):
    pass


@dataclass
class DataCfg:
    kind: Literal["tokens", "synthetic"] = "tokens"
    """`tokens`: shards written by `pithtrain tokenize`; `synthetic`: random tokens with a fixed seed."""
    path: str = ""
    """Directory holding `index.json` and the shards (kind = "tokens"); relative to the working directory."""
    seq_len: Positive = 2048
    """Tokens per training sequence."""

    def __post_init__(self):
        if self.kind == "tokens" and not self.path:
            raise ConfigError(
                'data.path is empty: with data.kind = "tokens" name a directory from `pithtrain tokenize`.'
            )


def _index_problem(index) -> str | None:
    """What is wrong with a parsed index.json, naming the field, or None."""
    if not isinstance(index, dict):
        return f"it holds a JSON {type(index).__name__}, not an object"
    if index.get("format") != TOKENS_FORMAT:
        return f"field 'format' is {index.get('format')!r}, not {TOKENS_FORMAT!r}"
    if index.get("dtype") not in ("uint16", "uint32"):
        return f"field 'dtype' is {index.get('dtype')!r}; allowed: 'uint16', 'uint32'"
    for key in ("num_tokens", "max_token_id"):
        if type(index.get(key)) is not int or index[key] < 0:
            return f"field '{key}' is {index.get(key, 'missing')!r}, not a non-negative integer"
    shards = index.get("shards")
    if not isinstance(shards, list) or not shards:
        return f"field 'shards' is {shards!r}, not a non-empty list"
    for i, shard in enumerate(shards):
        ok = isinstance(shard, dict) and isinstance(shard.get("file"), str) and type(shard.get("num_tokens")) is int
        if not ok or shard["num_tokens"] < 0 or "/" in shard["file"]:
            return f"field 'shards[{i}]' is {shard!r}, not {{'file': NAME in the directory, 'num_tokens': INT >= 0}}"
    return None


class TokenShardDataset:
    """Every shard's size and token range are checked here, before the run writes anything."""

    def __init__(self, path: str, seq_len: int, vocab_size: int):
        root = Path(path)
        index_file = root / "index.json"
        if not index_file.is_file():
            raise DataError(
                f"data.path = '{path}' has no index.json. Point data.path at a directory written by "
                f"`pithtrain tokenize --output DIR ...`, or tokenize your corpus first."
            )
        try:
            index = json.loads(index_file.read_text())
        except ValueError as e:
            index, problem = None, f"it is not valid JSON ({e})"
        else:
            problem = _index_problem(index)
        if problem:
            raise DataError(f"'{index_file}' is not a pithtrain token index: {problem}. Re-run `pithtrain tokenize`.")
        if index["max_token_id"] >= vocab_size:
            raise DataError(
                f"data.path = '{path}' holds token id {index['max_token_id']}, but model.vocab_size = {vocab_size}. "
                f"Use a model whose vocab_size exceeds every token id (the tokenizer's vocabulary is "
                f"{index.get('tokenizer_vocab_size', 'unknown')}), or re-tokenize with a smaller tokenizer."
            )
        self.seq_len = seq_len
        self.shards, self.starts = [], []
        total = 0
        for shard in index["shards"]:
            file = root / shard["file"]
            expected = shard["num_tokens"] * np.dtype(index["dtype"]).itemsize
            if not file.is_file() or file.stat().st_size != expected:
                raise DataError(f"shard '{file}' is missing or not {expected} bytes long. Re-run `pithtrain tokenize`.")
            tokens = np.memmap(file, dtype=index["dtype"], mode="r") if expected else np.zeros(0, index["dtype"])
            top = int(tokens.max()) if len(tokens) else -1  # one vectorised pass: the index may not match the bytes
            if top >= vocab_size:
                raise DataError(
                    f"shard '{file}' holds token id {top} >= model.vocab_size = {vocab_size}, though index.json says "
                    f"the largest is {index['max_token_id']}: the shard was altered. Re-run `pithtrain tokenize`."
                )
            n = (len(tokens) - 1) // seq_len
            if n > 0:
                self.shards.append(tokens)
                self.starts.append(total)
                total += n
        if total == 0:
            raise DataError(
                f"data.path = '{path}' holds {index['num_tokens']} tokens, fewer than one sequence of "
                f"data.seq_len + 1 = {seq_len + 1}. Add text to the corpus or lower data.seq_len."
            )
        self.num_samples = total

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, i: int) -> torch.Tensor:
        s = int(np.searchsorted(self.starts, i, side="right")) - 1
        offset = (i - self.starts[s]) * self.seq_len
        return torch.from_numpy(self.shards[s][offset : offset + self.seq_len + 1].astype(np.int64))


class SyntheticDataset:
    """Uniformly random tokens; sample i depends only on (seed, i), so runs are reproducible."""

    def __init__(self, seq_len: int, vocab_size: int, seed: int):
        self.seq_len, self.vocab_size, self.seed = seq_len, vocab_size, seed

    def __len__(self) -> int:
        return 1 << 40

    def __getitem__(self, i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        return torch.randint(0, self.vocab_size, (self.seq_len + 1,), generator=g)


def make_dataset(cfg: DataCfg, vocab_size: int, seed: int):
    if cfg.kind == "tokens":
        return TokenShardDataset(cfg.path, cfg.seq_len, vocab_size)
    elif cfg.kind == "synthetic":
        return SyntheticDataset(cfg.seq_len, vocab_size, seed)
    raise AssertionError(cfg.kind)


class ResumableSampler:
    """Sample order: a fresh seeded permutation each epoch. The only state is `consumed_samples`, so a
    resumed run reads exactly the samples the uninterrupted run would have read."""

    def __init__(self, num_samples: int, seed: int, shuffle: bool = True):
        self.num_samples, self.seed, self.shuffle = num_samples, seed, shuffle
        self._epoch, self._perm = -1, None

    def index(self, position: int) -> int:
        epoch, i = divmod(position, self.num_samples)
        if not self.shuffle:
            return i
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed + 7919 * epoch)
            self._epoch, self._perm = epoch, torch.randperm(self.num_samples, generator=g)
        return int(self._perm[i])


def get_batch(dataset, sampler: ResumableSampler, start: int, count: int):
    """Samples [start, start + count) of the sampler's order as (input_ids, labels), both (count, seq_len)."""
    windows = torch.stack([dataset[sampler.index(p)] for p in range(start, start + count)])
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
