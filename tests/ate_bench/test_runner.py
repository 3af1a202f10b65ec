"""The toy tasks end to end: materialize, run gold/noop (and a stand-in Claude Code), check, record."""

import json
import os
import stat
from pathlib import Path

import pytest

from ate_bench.__main__ import main
from ate_bench.agents import CannotStart
from ate_bench.runner import RunOptions, load_records, report, run_once
from ate_bench.tasks import load_tasks

TOY_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "tasks"
CLAUDE_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "transcripts" / "claude_stream.jsonl"


@pytest.fixture
def dirs(tmp_path):
    return {
        "results_dir": tmp_path / "results",
        "work_root": tmp_path / "work",
        "cache_dir": tmp_path / "cache",
    }


def _run(task_id: str, agent: str, dirs: dict, **kw) -> dict:
    task = load_tasks(TOY_TASKS)[task_id]
    path = run_once(RunOptions(task=task, framework="pithtrain", agent=agent, **dirs, **kw))
    return json.loads(path.read_text())


@pytest.mark.parametrize("task_id", ["operate-01", "qa-01"])
def test_gold_passes_and_noop_fails(task_id, dirs):
    gold = _run(task_id, "gold", dirs)
    assert gold["verdict"] == {"passed": True, "reasons": [], "checker_exit": 0}
    assert gold["agent"]["kind"] == "harness-validation"
    noop = _run(task_id, "noop", dirs)
    assert not noop["verdict"]["passed"] and noop["verdict"]["reasons"]
    for rec in (gold, noop):
        fw = rec["framework"]
        assert fw["mode"] == "repo" and len(fw["version"]) == 40 and len(fw["tree_sha256"]) == 64
        assert set(rec["metrics"]) >= {
            "session_duration_s",
            "active_gpu_s",
            "agent_turns",
            "context_tokens_median",
            "output_tokens",
        }
        assert rec["metrics"]["agent_turns"] == 0
        assert Path(rec["transcript"]).is_file() and rec["started_at"] <= rec["ended_at"]
    # Both toy tasks start from the same pristine source tree.
    assert gold["framework"]["tree_sha256"] == noop["framework"]["tree_sha256"]


def test_operate_record_has_diff_prepare_and_hidden_benchmark(dirs):
    rec = _run("operate-01", "gold", dirs)
    assert rec["framework"]["prepared"] == ["train.sh"]
    assert "+1.6667" in rec["workspace_diff"] and "RESULT.txt" in rec["changed_paths"]
    ws = Path(rec["workspace"])
    # The agent must never see checkers, gold solutions or the harness.
    for hidden in ("ate_bench", "tasks", "tests/fixtures/ate", "tests/ate_bench"):
        assert not (ws / hidden).exists(), hidden
    # `check` re-runs the checker on the saved workspace.
    record = Path(dirs["results_dir"]) / rec["run_id"] / "record.json"
    assert main(["--tasks-dir", str(TOY_TASKS), "check", "--record", str(record)]) == 0
    (ws / "RESULT.txt").write_text("2.0\n")
    assert main(["--tasks-dir", str(TOY_TASKS), "check", "--record", str(record)]) == 1


def test_no_skills_strips_agent_files(dirs):
    # The pithtrain workspace is `git archive HEAD` of this repo; strip whatever instruction files it has.
    rec = _run("qa-01", "noop", dirs, skills=False)
    ws = Path(rec["workspace"])
    assert rec["framework"]["skills"] == "stripped"
    for name in ("AGENTS.md", "CLAUDE.md", ".claude"):
        assert not list(ws.rglob(name)), name


def test_report_keeps_harness_validation_apart(dirs, capsys):
    _run("qa-01", "gold", dirs)
    _run("qa-01", "gold", dirs)
    text = report(load_records(dirs["results_dir"]))
    assert "Harness validation (gold/noop: not agent results)" in text
    assert "Agent results" not in text
    assert "| qa-01 | pithtrain | gold | kept | 2 | 2/2 |" in text


def _fake_claude(tmp_path: Path) -> Path:
    """A `claude` on PATH that replays the stream-json fixture, then answers."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lines = [json.loads(x)["line"] for x in CLAUDE_FIXTURE.read_text().splitlines()]
    (tmp_path / "replay.jsonl").write_text("\n".join(lines) + "\n")
    script = bindir / "claude"
    script.write_text(f'#!/usr/bin/env bash\necho "$@" > "$HOME/argv.txt"\ncat {tmp_path / "replay.jsonl"}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


def test_claude_code_pipeline_with_a_stand_in_cli(dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_claude(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("SOME_OTHER_SECRET", "leak")
    rec = _run("qa-01", "claude-code", dirs)
    assert rec["agent"]["kind"] == "agent" and rec["agent"]["version"] == "2.0.14"
    assert rec["metrics"]["agent_turns"] == 4 and rec["metrics"]["output_tokens"] == 567
    assert rec["agent"]["secrets_passed"] == ["ANTHROPIC_API_KEY"]
    assert "SOME_OTHER_SECRET" not in rec["agent"]["env_passed"]
    # Q&A: edit tools disallowed. The answer lacks `pyproject.toml:<line>`, so the checker fails it.
    argv = (Path(rec["workspace"]).parent / "home" / "argv.txt").read_text()
    assert "--disallowedTools Edit,MultiEdit,Write,NotebookEdit" in argv
    assert not rec["verdict"]["passed"]


def test_cannot_start_records_nothing(dirs, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    task = load_tasks(TOY_TASKS)["qa-01"]
    with pytest.raises(CannotStart, match="no credentials|not on PATH"):
        run_once(RunOptions(task=task, framework="pithtrain", agent="claude-code", **dirs))
    argv = [
        "--tasks-dir",
        str(TOY_TASKS),
        "--results-dir",
        str(dirs["results_dir"]),
        "run",
        "--task",
        "qa-01",
    ]
    argv += ["--framework", "pithtrain", "--agent", "mini-swe-agent", "--work-root", str(dirs["work_root"])]
    assert main(argv) == 2
    assert "cannot start" in capsys.readouterr().err
    assert not dirs["results_dir"].exists() and not dirs["work_root"].exists()
