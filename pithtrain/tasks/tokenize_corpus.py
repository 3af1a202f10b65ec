"""Tokenize local text files into packed token shards (see modules/data.py for the format).

Inputs: `.jsonl` (one document per line, text under --text-field), `.txt` (one document per file),
`.parquet` (a text column; needs pyarrow). The tokenizer is a local directory with `tokenizer.json`
(the `tokenizers` library); nothing is downloaded. Shards are written to a temporary directory and
renamed into place at the end, so a failed run leaves no partial output.
"""

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pithtrain.config import ConfigError, Positive
from pithtrain.modules.data import TOKENS_FORMAT, DataError


@dataclass
class TokenizeCorpusCfg:
    inputs: list[str]
    """Files to tokenize (.jsonl, .txt, .parquet)."""
    tokenizer: str
    """Directory holding tokenizer.json (and optionally tokenizer_config.json naming eos_token)."""
    output: str
    """Directory to create: index.json plus tokens-NNNNN.bin shards. Must not exist yet."""
    text_field: str = "text"
    """Field holding the text in .jsonl and .parquet inputs."""
    eos_token: str = ""
    """Token appended after each document; empty takes tokenizer_config.json's eos_token."""
    shard_tokens: Positive = 1 << 28
    """Most tokens per shard file (every shard but the last holds exactly this many; documents may span two)."""
    batch_docs: Positive = 1024
    """Documents encoded per batch (parallel inside `tokenizers`)."""


def read_documents(path: Path, text_field: str):
    try:
        yield from _read_documents(path, text_field)
    except UnicodeDecodeError as e:
        raise DataError(
            f"input '{path}' is not UTF-8 text (byte {e.start} is {e.object[e.start : e.start + 1]!r}; binary, or "
            f"another encoding). Convert it to UTF-8 (e.g. iconv) or leave it out."
        ) from e


def _read_documents(path: Path, text_field: str):
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)[text_field]
                except (ValueError, KeyError, TypeError) as e:
                    raise DataError(f"{path}:{n} is not a JSON object with a '{text_field}' field ({e!r}).") from e
    elif path.suffix == ".txt":
        yield path.read_text(encoding="utf-8")
    elif path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise DataError(f"reading '{path}' needs pyarrow: pip install pyarrow.") from e
        table = pq.read_table(path, columns=[text_field])
        yield from table.column(text_field).to_pylist()
    else:
        raise DataError(f"input '{path}' has suffix '{path.suffix}'; allowed: .jsonl, .txt, .parquet.")


def load_tokenizer(directory: str, eos_token: str):
    from tokenizers import Tokenizer

    tok_file = Path(directory) / "tokenizer.json"
    if not tok_file.is_file():
        raise DataError(
            f"tokenizer directory '{directory}' has no tokenizer.json (or does not exist). "
            f"Pass a local directory saved by `tokenizers` or `transformers`."
        )
    try:
        tokenizer = Tokenizer.from_file(str(tok_file))
    except Exception as e:  # tokenizers raises a bare Exception for any parse error
        raise DataError(
            f"'{tok_file}' is not a readable tokenizer ({str(e).splitlines()[0][:200]}). Re-save it with "
            f"`tokenizers` or `transformers` (save_pretrained), or pass another --tokenizer directory."
        ) from e
    if not eos_token:
        config_file = Path(directory) / "tokenizer_config.json"
        try:
            eos = json.loads(config_file.read_text()).get("eos_token") if config_file.is_file() else None
        except (ValueError, AttributeError) as e:
            raise DataError(
                f"'{config_file}' is not a JSON object ({e}). Fix or remove it, or name the token with --eos-token."
            ) from e
        eos_token = eos["content"] if isinstance(eos, dict) else eos
    eos_id = tokenizer.token_to_id(eos_token) if eos_token else None
    if eos_id is None:
        raise DataError(
            f"tokenizer '{directory}' has no end-of-sequence token {eos_token!r}. "
            f"Name one that is in its vocabulary with --eos-token."
        )
    return tokenizer, eos_id


def launch(cfg: TokenizeCorpusCfg) -> dict:
    inputs = [Path(p) for p in cfg.inputs]
    for p in inputs:
        if not p.is_file():
            raise DataError(f"input '{p}' does not exist.")
    out = Path(cfg.output)
    if out.exists():
        raise ConfigError(f"output '{out}' already exists; pick a new directory (nothing was written).")
    tokenizer, eos_id = load_tokenizer(cfg.tokenizer, cfg.eos_token)
    vocab = tokenizer.get_vocab_size()
    dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
    tmp = out.parent / f".tmp-{out.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shards, buffer, num_docs, max_id = [], [], 0, -1

    def flush(count: int):
        """Write the buffer's first `count` tokens as the next shard; the rest stays buffered."""
        data = np.concatenate(buffer)
        buffer[:] = [data[count:]] if count < len(data) else []
        name = f"tokens-{len(shards):05d}.bin"
        data[:count].astype(dtype).tofile(tmp / name)
        shards.append({"file": name, "num_tokens": count})

    try:
        for path in inputs:
            docs = []
            for doc in [*read_documents(path, cfg.text_field), None]:
                if doc is not None:
                    docs.append(doc)
                if docs and (doc is None or len(docs) == cfg.batch_docs):
                    for enc in tokenizer.encode_batch(docs, add_special_tokens=False):
                        ids = np.asarray(enc.ids + [eos_id], dtype=np.int64)
                        max_id = max(max_id, int(ids.max()))
                        buffer.append(ids)
                    num_docs += len(docs)
                    docs = []
                    while sum(len(b) for b in buffer) >= cfg.shard_tokens:
                        flush(cfg.shard_tokens)
        if buffer:
            flush(sum(len(b) for b in buffer))
        num_tokens = sum(s["num_tokens"] for s in shards)
        if num_docs == 0 or num_tokens == num_docs:
            raise DataError(f"the inputs {cfg.inputs} hold no text (documents: {num_docs}). Nothing was written.")
        index = {
            "format": TOKENS_FORMAT,
            "dtype": np.dtype(dtype).name,
            "num_tokens": num_tokens,
            "num_documents": num_docs,
            "max_token_id": max_id,
            "eos_id": eos_id,
            "tokenizer_vocab_size": vocab,
            "tokenizer": cfg.tokenizer,
            "shards": shards,
        }
        (tmp / "index.json").write_text(json.dumps(index, indent=1))
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {num_tokens:,} tokens from {num_docs:,} documents to {out}", flush=True)
    return index
