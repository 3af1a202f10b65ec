"""Bad input: a clear one-paragraph error, exit status 2, nothing written, checkpoints untouched."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, TINY_TOKENIZER, TINY_TOKENS

from pithtrain.__main__ import main


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "toml_edit, message",
    [
        (lambda t: t.replace("[training]", "[training\n"), "is not valid TOML"),
        (lambda t: t + "\n[logging]\nlog_every = 3\n", "unknown config key 'logging.log_every'"),
        (
            lambda t: t.replace("max_steps = 2", 'max_steps = "2"'),
            "'training.max_steps' = '2' has the wrong type",
        ),
        (lambda t: t.replace(str(TINY_TOKENS), "/nonexistent/tokens"), "has no index.json"),
        (
            lambda t: t.replace("vocab_size = 2048", "vocab_size = 512"),
            "holds token id 2047, but model.vocab_size",
        ),
    ],
)
def test_bad_train_config(tiny_config, tmp_path, capsys, toml_edit, message):
    path = tiny_config(max_steps=2)
    path.write_text(toml_edit(path.read_text()))
    code, err = run_cli(["train", path], capsys)
    assert code == 2 and message in err, err
    assert files_under(tmp_path / "run") == []


def test_empty_corpus(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("\n")
    code, err = run_cli(
        ["tokenize", tmp_path / "empty.jsonl", "--tokenizer", TINY_TOKENIZER, "--output", tmp_path / "out"],
        capsys,
    )
    assert code == 2 and "hold no text" in err
    assert files_under(tmp_path) == ["empty.jsonl"]


def test_too_short_corpus(tmp_path, tiny_config, capsys):
    (tmp_path / "short.txt").write_text("tiny")
    assert (
        main(
            [
                "tokenize",
                str(tmp_path / "short.txt"),
                "--tokenizer",
                str(TINY_TOKENIZER),
                "--output",
                str(tmp_path / "short"),
            ]
        )
        == 0
    )
    path = tiny_config(max_steps=2)
    path.write_text(path.read_text().replace(str(TINY_TOKENS), str(tmp_path / "short")))
    code, err = run_cli(["train", path], capsys)
    assert code == 2 and "fewer than one sequence" in err


def test_missing_tokenizer_dir(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("hello")
    code, err = run_cli(
        ["tokenize", tmp_path / "a.txt", "--tokenizer", tmp_path / "nope", "--output", tmp_path / "out"],
        capsys,
    )
    assert code == 2 and "has no tokenizer.json (or does not exist)" in err
    assert not (tmp_path / "out").exists()


def test_malformed_jsonl(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"text": "ok"}\n{"body": "no text field"}\n')
    code, err = run_cli(
        ["tokenize", tmp_path / "a.jsonl", "--tokenizer", TINY_TOKENIZER, "--output", tmp_path / "out"],
        capsys,
    )
    assert code == 2 and "a.jsonl:2 is not a JSON object with a 'text' field" in err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".tmp-*"))


def test_corrupt_checkpoint_is_refused_and_kept(tiny_config, tmp_path, capsys):
    path = tiny_config(max_steps=2)
    assert main(["train", str(path)]) == 0
    step_dir = tmp_path / "run" / "checkpoints" / "step-00000002"
    for f in step_dir.glob("*.distcp"):
        f.write_bytes(b"garbage")
    before = {p: p.read_bytes() for p in step_dir.rglob("*") if p.is_file()}
    code, err = run_cli(["train", path, "--set", "training.max_steps=3"], capsys)
    assert code == 2 and "step-00000002' is corrupt" in err and "bytes, saved as" in err
    assert {p: p.read_bytes() for p in step_dir.rglob("*") if p.is_file()} == before
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text() == "step-00000002"


def test_flipped_byte_fails_the_checksum(tiny_config, tmp_path, capsys):
    """Same size, one byte changed: refused before anything is loaded, naming the file."""
    path = tiny_config(max_steps=2)
    assert main(["train", str(path)]) == 0
    (distcp,) = (tmp_path / "run" / "checkpoints" / "step-00000002").glob("*.distcp")
    data = bytearray(distcp.read_bytes())
    data[len(data) // 2] ^= 0x40
    distcp.write_bytes(bytes(data))
    code, err = run_cli(["train", path, "--set", "training.max_steps=3"], capsys)
    assert code == 2 and f"'{distcp}' fails its CRC32 checksum" in err, err


def test_load_error_that_is_not_corruption(tiny_config, tmp_path, monkeypatch):
    """An error after the integrity checks (here a simulated out-of-memory) is raised as it is, with a note
    that keeps the user from deleting a good checkpoint."""
    from pithtrain.modules import checkpoint

    path = tiny_config(max_steps=2)
    assert main(["train", str(path)]) == 0

    def oom(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(checkpoint.dcp, "load", oom)
    with pytest.raises(RuntimeError, match="out of memory") as e:
        main(["train", str(path), "--set", "training.max_steps=3"])
    notes = " ".join(getattr(e.value, "__notes__", []))
    assert "not corruption, keep the checkpoint" in notes and "delete" not in notes


@pytest.mark.parametrize(
    "index_edit, message",
    [
        (lambda i: [i], "it holds a JSON list, not an object"),
        (lambda i: {k: v for k, v in i.items() if k != "max_token_id"}, "field 'max_token_id' is 'missing'"),
        (lambda i: i | {"dtype": "float99"}, "field 'dtype' is 'float99'; allowed: 'uint16', 'uint32'"),
        (lambda i: i | {"shards": [{"file": "x.bin"}]}, "field 'shards[0]' is {'file': 'x.bin'}"),
    ],
)
def test_bad_token_index(tiny_config, tmp_path, capsys, index_edit, message):
    shutil.copytree(TINY_TOKENS, tmp_path / "t")
    index = json.loads((tmp_path / "t" / "index.json").read_text())
    (tmp_path / "t" / "index.json").write_text(json.dumps(index_edit(index)))
    path = tiny_config(max_steps=2)
    path.write_text(path.read_text().replace(str(TINY_TOKENS), str(tmp_path / "t")))
    code, err = run_cli(["train", path], capsys)
    assert code == 2 and "index.json' is not a pithtrain token index: " + message in err, err
    assert files_under(tmp_path / "run") == []


def test_altered_shard_refused_before_anything_is_written(tiny_config, tmp_path, capsys):
    shutil.copytree(TINY_TOKENS, tmp_path / "t")
    shard = tmp_path / "t" / "tokens-00000.bin"
    data = bytearray(shard.read_bytes())
    data[-2:] = (4000).to_bytes(2, "little")  # the last sample: read only at the end of an epoch
    shard.write_bytes(bytes(data))
    path = tiny_config(max_steps=2)
    path.write_text(path.read_text().replace(str(TINY_TOKENS), str(tmp_path / "t")))
    code, err = run_cli(["train", path], capsys)
    assert code == 2 and f"shard '{shard}' holds token id 4000" in err, err
    assert files_under(tmp_path / "run") == []


def test_corrupt_tokenizer_json(tmp_path, capsys):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    (tmp_path / "a.txt").write_text("hello")
    code, err = run_cli(
        ["tokenize", tmp_path / "a.txt", "--tokenizer", tmp_path / "tok", "--output", tmp_path / "o"], capsys
    )
    assert code == 2 and "tokenizer.json' is not a readable tokenizer" in err and "--tokenizer" in err, err
    assert not (tmp_path / "o").exists()


def test_user_files_checked_without_assert(tmp_path):
    """`python -O` strips asserts: with the modules compiled as -O compiles them, a meta.json and an index.json of
    the wrong format are still refused."""
    from pithtrain.config import UserInputError
    from pithtrain.modules import checkpoint, data

    def without_asserts(module):
        namespace = {"__name__": module.__name__}
        exec(compile(open(module.__file__).read(), module.__file__, "exec", optimize=1), namespace)
        return namespace

    (tmp_path / "step-00000001").mkdir()
    (tmp_path / "step-00000001" / "meta.json").write_text(json.dumps({"format": "other", "model": {}}))
    (tmp_path / "index.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(UserInputError, match="is not a pithtrain checkpoint's meta.json"):
        without_asserts(checkpoint)["read_meta"](tmp_path / "step-00000001")
    with pytest.raises(UserInputError, match="field 'format' is 'other'"):
        without_asserts(data)["TokenShardDataset"](str(tmp_path), 8, 64)


def test_weights_only_checkpoint_is_not_resumed(tiny_config, tmp_path, capsys):
    import dataclasses

    import torch

    from pithtrain.models import model_family
    from pithtrain.modules.checkpoint import save_checkpoint
    from pithtrain.tasks.pretrain_lm import load_pretrain_cfg, make_model

    path = tiny_config(max_steps=2)
    cfg = load_pretrain_cfg(path)
    model, _ = make_model(cfg, model_family("qwen3_moe"), torch.device("cpu"))
    meta = {"model": dataclasses.asdict(cfg.model), "consumed_samples": 0}
    save_checkpoint(tmp_path / "run" / "checkpoints", 0, model, None, meta, 1)
    code, err = run_cli(["train", path], capsys)
    assert code == 2 and "holds model weights only" in err and "checkpoint.init_from" in err, err


def test_checkpoint_of_another_model_is_refused(tiny_config, tmp_path, capsys):
    path = tiny_config(max_steps=2)
    assert main(["train", str(path)]) == 0
    code, err = run_cli(["train", path, "--set", "model.num_experts=8", "--set", "training.max_steps=3"], capsys)
    assert code == 2 and "written for another model (model.num_experts: checkpoint 4, config 8)" in err


def test_missing_checkpoint_pointer_target(tiny_config, tmp_path, capsys):
    path = tiny_config(max_steps=2)
    assert main(["train", str(path)]) == 0
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "step-00000002")
    code, err = run_cli(["train", path, "--set", "training.max_steps=3"], capsys)
    assert code == 2 and "missing or incomplete" in err


def test_resume_never_refuses_existing_run(tiny_config, capsys):
    path = tiny_config(max_steps=2)
    assert main(["train", str(path)]) == 0
    code, err = run_cli(["train", path, "--set", 'checkpoint.resume="never"'], capsys)
    assert code == 2 and "already holds checkpoints" in err


def test_convert_errors(tmp_path, capsys):
    code, err = run_cli(["convert", "hf-to-pithtrain", "--source", tmp_path, "--output", tmp_path / "o"], capsys)
    assert code == 2 and "has no config.json" in err
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    code, err = run_cli(["convert", "hf-to-pithtrain", "--source", tmp_path, "--output", tmp_path / "o"], capsys)
    assert code == 2 and "model_type 'llama'" in err
    code, err = run_cli(["convert", "pithtrain-to-hf", "--source", tmp_path, "--output", tmp_path / "o2"], capsys)
    assert code == 2 and "not a readable pithtrain checkpoint" in err


def test_train_help_lists_every_family_s_model_keys():
    from pithtrain.__main__ import make_parser

    train = make_parser()._subparsers._group_actions[0].choices["train"]
    text = train.format_help()
    for key in ["training.max_steps", "model.num_experts ", "model.n_routed_experts", "model.sliding_window"]:
        assert key in text, key
    for family in ["qwen3_moe", "deepseek_v2", "gpt_oss"]:
        assert f"model.* with model.family = '{family}':" in text


def test_entry_point_help_and_exit_status(tmp_path):
    """The real `python -m pithtrain` process: --help explains, a bad config exits 2."""
    out = subprocess.run(
        [sys.executable, "-m", "pithtrain", "train", "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0 and "training.max_steps" in out.stdout and "--set" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "pithtrain", "train", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_infinite_learning_rate_is_refused(tiny_config, tmp_path, capsys):
    code, err = run_cli(["train", tiny_config(max_steps=2), "--set", "training.lr=inf"], capsys)
    assert code == 2 and "'training.lr' = inf is not a finite number" in err, err
    assert files_under(tmp_path / "run") == []


BINARY = bytes(range(256)) * 4  # not UTF-8 from byte 128 on


def test_binary_config_file(tmp_path, capsys):
    (tmp_path / "run.toml").write_bytes(BINARY)
    code, err = run_cli(["train", tmp_path / "run.toml"], capsys)
    assert code == 2 and err.count("\n") == 1 and f"config file '{tmp_path / 'run.toml'}' is not UTF-8" in err, err


@pytest.mark.parametrize("name", ["binary.jsonl", "latin1.txt"])
def test_non_utf8_tokenize_input(tmp_path, capsys, name):
    data = BINARY if name.startswith("binary") else "café au lait".encode("latin-1")
    (tmp_path / name).write_bytes(data)
    code, err = run_cli(
        ["tokenize", tmp_path / name, "--tokenizer", TINY_TOKENIZER, "--output", tmp_path / "out"], capsys
    )
    assert code == 2 and err.count("\n") == 1 and f"input '{tmp_path / name}' is not UTF-8 text" in err, err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("content, message", [(BINARY, "is not UTF-8 text"), (b"", "holds no steps (empty)")])
def test_plot_refuses_unreadable_or_empty_metrics(tmp_path, capsys, content, message):
    (tmp_path / "metrics.jsonl").write_bytes(content)
    code, err = run_cli(["plot", tmp_path, "--output", tmp_path / "m.png"], capsys)
    assert code == 2 and err.count("\n") == 1 and f"'{tmp_path / 'metrics.jsonl'}' {message}" in err, err
    assert not (tmp_path / "m.png").exists()


@pytest.fixture
def sharded_hf_dir(tiny_config, tmp_path, monkeypatch):
    """The tiny model exported as a Hugging Face directory in several shards, with its index."""
    import dataclasses

    import torch

    from pithtrain.models import model_family
    from pithtrain.modules.checkpoint import save_checkpoint
    from pithtrain.tasks import convert_checkpoint
    from pithtrain.tasks.pretrain_lm import load_pretrain_cfg, make_model

    cfg = load_pretrain_cfg(tiny_config(max_steps=2))
    model, _ = make_model(cfg, model_family("qwen3_moe"), torch.device("cpu"))
    save_checkpoint(tmp_path / "pt", 0, model, None, {"model": dataclasses.asdict(cfg.model)}, 1)
    monkeypatch.setattr(convert_checkpoint, "SHARD_BYTES", 64 * 1024)
    assert main(["convert", "pithtrain-to-hf", "--source", str(tmp_path / "pt"), "--output", str(tmp_path / "hf")]) == 0
    assert len(list((tmp_path / "hf").glob("*.safetensors"))) > 2
    return tmp_path / "hf"


def test_missing_hf_shard_is_named(sharded_hf_dir, tmp_path, capsys):
    shard = sorted(sharded_hf_dir.glob("*.safetensors"))[1]
    shard.unlink()
    code, err = run_cli(["convert", "hf-to-pithtrain", "--source", sharded_hf_dir, "--output", tmp_path / "o"], capsys)
    assert code == 2 and err.count("\n") == 1 and f"'{shard}' is missing: 1 of the" in err, err
    assert "config.json" not in err and not (tmp_path / "o").exists()


def test_convert_config_mismatch_is_one_line(sharded_hf_dir, tmp_path, capsys):
    config = json.loads((sharded_hf_dir / "config.json").read_text())
    (sharded_hf_dir / "config.json").write_text(json.dumps(config | {"moe_intermediate_size": 24}))
    code, err = run_cli(["convert", "hf-to-pithtrain", "--source", sharded_hf_dir, "--output", tmp_path / "o"], capsys)
    assert code == 2 and err.count("\n") == 1 and "do not fit the model that its config.json describes" in err, err
    assert "tensors differ in shape" in err and "(first: model.layers.0.mlp.experts.gate_up_proj: weights" in err, err
