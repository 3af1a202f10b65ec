"""Tokenizing local files into shards, reading them back, and the resumable sampler."""

import json

import numpy as np
import pytest
from conftest import TINY_TOKENIZER, TINY_TOKENS

from pithtrain.modules.data import DataError, ResumableSampler, TokenShardDataset, get_batch
from pithtrain.tasks.tokenize_corpus import TokenizeCorpusCfg, launch, load_tokenizer


def test_tokenize_jsonl_and_txt_round_trip(tmp_path):
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"text": "def f(x): return x"}) + "\n\n" + json.dumps({"text": "while True: pass"}) + "\n"
    )
    (tmp_path / "b.txt").write_text("The with statement.")
    index = launch(
        TokenizeCorpusCfg(
            inputs=[str(tmp_path / "a.jsonl"), str(tmp_path / "b.txt")],
            tokenizer=str(TINY_TOKENIZER),
            output=str(tmp_path / "out"),
            shard_tokens=8,
        )
    )
    assert index["num_documents"] == 3 and len(index["shards"]) > 1
    sizes = [s["num_tokens"] for s in index["shards"]]
    assert set(sizes[:-1]) == {8} and 0 < sizes[-1] <= 8, sizes  # shard_tokens is the most per shard
    tokenizer, eos = load_tokenizer(str(TINY_TOKENIZER), "")
    tokens = np.concatenate([np.fromfile(tmp_path / "out" / s["file"], dtype=index["dtype"]) for s in index["shards"]])
    docs = tokenizer.decode_batch([d.tolist() for d in np.split(tokens, np.where(tokens == eos)[0] + 1)[:-1]])
    assert docs == ["def f(x): return x", "while True: pass", "The with statement."]
    assert not list(tmp_path.glob(".tmp-*"))


def test_dataset_windows_and_labels():
    ds = TokenShardDataset(str(TINY_TOKENS), seq_len=16, vocab_size=2048)
    raw = np.fromfile(TINY_TOKENS / "tokens-00000.bin", dtype=np.uint16)
    assert len(ds) == (len(raw) - 1) // 16
    assert ds[3].tolist() == raw[48:65].tolist()
    inputs, labels = get_batch(ds, ResumableSampler(len(ds), seed=0, shuffle=False), 3, 2)
    assert inputs[0].tolist() == raw[48:64].tolist() and labels[0].tolist() == raw[49:65].tolist()


def test_sampler_is_deterministic_and_covers_each_epoch():
    a, b = ResumableSampler(10, seed=5), ResumableSampler(10, seed=5)
    order = [a.index(p) for p in range(25)]
    assert sorted(order[:10]) == list(range(10)) and sorted(order[10:20]) == list(range(10))
    assert order[:10] != order[10:20]
    assert [b.index(p) for p in range(17, 25)] == order[17:]  # resuming mid-epoch from the position alone


def test_token_ids_beyond_vocab_are_refused():
    with pytest.raises(DataError, match="holds token id 2047, but model.vocab_size = 1000"):
        TokenShardDataset(str(TINY_TOKENS), seq_len=16, vocab_size=1000)


def test_altered_shard_is_caught_before_reading(tmp_path):
    import shutil

    shutil.copytree(TINY_TOKENS, tmp_path / "t")
    raw = np.fromfile(tmp_path / "t" / "tokens-00000.bin", dtype=np.uint16)
    raw[20] = 4000
    raw.tofile(tmp_path / "t" / "tokens-00000.bin")
    with pytest.raises(DataError, match=r"shard '.*tokens-00000.bin' holds token id 4000 >= model.vocab_size"):
        TokenShardDataset(str(tmp_path / "t"), seq_len=16, vocab_size=2048)
