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
    assert code == 2 and "could not be loaded" in err and "corrupt" in err
    assert {p: p.read_bytes() for p in step_dir.rglob("*") if p.is_file()} == before
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text() == "step-00000002"


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
