"""The toy tasks end to end: materialize, run gold/noop (and a stand-in Claude Code), check, record."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ate_bench import agents, runner, workspace
from ate_bench.__main__ import main
from ate_bench.agents import CannotStart, make_launch
from ate_bench.runner import RunOptions, load_records, report, run_once
from ate_bench.tasks import load_tasks
from ate_bench.workspace import REPO_ROOT, MaterializeError, repo_state

TOY_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "tasks"
CLAUDE_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "transcripts" / "claude_stream.jsonl"


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    """The GPU count a run checks its profile against, fixed so these tests mean the same on a GPU host."""
    monkeypatch.setattr(runner, "gpu_inventory", lambda: [])


@pytest.fixture(autouse=True)
def no_pinned_agents(monkeypatch, tmp_path):
    """These tests put stand-in CLIs on PATH: the pinned ones `make agents` installed must not shadow them."""
    monkeypatch.setattr(agents, "AGENTS_DIR", tmp_path / "no-agents")


@pytest.fixture
def dirs(tmp_path):
    return {
        "results_dir": tmp_path / "results",
        "work_root": tmp_path / "work",
        "cache_dir": tmp_path / "cache",
    }


def _copy_task(tmp_path: Path, slug: str, category: str = "qa") -> Path:
    """A copy of a toy task (with its category's helpers) to break on purpose."""
    dest = tmp_path / "tasks" / category
    shutil.copytree(TOY_TASKS / category, dest)
    return dest / slug


def _run(task_id: str, agent: str, dirs: dict, **kw) -> dict:
    task = load_tasks(TOY_TASKS)[task_id]
    path = run_once(RunOptions(task=task, framework="pithtrain", agent=agent, **dirs, **kw))
    return json.loads(path.read_text())


@pytest.mark.parametrize("task_id", ["operate-01", "qa-01", "qa-02"])
def test_gold_passes_and_noop_fails(task_id, dirs):
    gold = _run(task_id, "gold", dirs)
    assert gold["verdict"] == {"status": "PASS", "passed": True, "reasons": [], "checker_exit": 0, "traceback": ""}
    assert gold["agent"]["kind"] == "harness-validation"
    noop = _run(task_id, "noop", dirs)
    assert noop["verdict"]["status"] == "FAIL" and not noop["verdict"]["passed"] and noop["verdict"]["reasons"]
    # The record names the task version: hashes of what decides the verdict.
    assert {"instruction.md", "check.py", "gold/pithtrain/solve.sh"} <= {
        k.split("/", 2)[2] for k in gold["task"]["files"] if k.count("/") >= 2
    }
    if task_id == "qa-02":
        assert "qa/toy-cli/key.toml" in gold["task"]["files"]
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
    assert rec["task"]["profile"] == "smoke" and rec["task"]["gpus"] == 0
    assert rec["run_id"].startswith("operate-01_smoke_pithtrain_gold_")
    assert rec["framework"]["prepared"] == ["train.sh"]
    # The provided script's log gives its run's wall time; its exit-time line closes it.
    (run,) = rec["script_logs"]["runs"]
    assert run["script"] == "train" and run["log"].startswith("artifacts/train-") and run["seconds"] >= 0
    assert rec["script_logs"]["without_exit_time"] == [] and not rec["notes"]
    assert "+1.6667" in rec["workspace_diff"] and "RESULT.txt" in rec["changed_paths"]
    ws = Path(rec["workspace"])
    # The agent must never see checkers, gold solutions or the harness.
    for hidden in ("ate_bench", "tasks", "tests/fixtures/ate", "tests/ate_bench", "results", "paper"):
        assert not (ws / hidden).exists(), hidden
    assert not (ws / "tests" / "fixtures" / "paper").exists()
    # Skills and the agents' folders stay in (only --no-skills removes them).
    head = subprocess.run(["git", "ls-tree", "--name-only", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    for kept in ("skills", ".claude", "AGENTS.md"):
        assert (ws / kept).exists() == (kept in head.stdout.split()), kept
    # `check` re-runs the checker on the saved workspace.
    record = Path(dirs["results_dir"]) / rec["run_id"] / "record.json"
    assert main(["--tasks-dir", str(TOY_TASKS), "check", "--record", str(record)]) == 0
    (ws / "RESULT.txt").write_text("2.0\n")
    assert main(["--tasks-dir", str(TOY_TASKS), "check", "--record", str(record)]) == 1


def test_a_log_without_exit_time_is_counted_apart(tmp_path):
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "train-20261201-100000.log").write_text("step 1\n")
    (tmp_path / "artifacts" / "verify-20261201-100000.log").write_text("step 1\nexit-time: 1796119230\n")
    (tmp_path / "artifacts" / "notes.log").write_text("not a provided script's log\n")
    logs = runner.script_logs(tmp_path)
    assert logs["without_exit_time"] == ["artifacts/train-20261201-100000.log"]
    assert [r["script"] for r in logs["runs"]] == ["train", "verify"]
    started = logs["runs"][1]["started"]
    assert logs["runs"][1]["seconds"] == round(1796119230 - started, 1) == logs["seconds_total"]


def test_no_skills_keeps_agents_md_and_records_what_went(dirs):
    # The pithtrain workspace is `git archive HEAD` of this repo (the rule itself: test_workspace.py).
    rec = _run("qa-01", "noop", dirs, skills=False)
    ws = Path(rec["workspace"])
    assert rec["framework"]["skills"] == "stripped"
    assert not (ws / "skills").exists() and not (ws / ".claude" / "skills").exists()
    assert (ws / "AGENTS.md").is_file() == (REPO_ROOT / "AGENTS.md").is_file()
    assert "## Skills" not in ((ws / "AGENTS.md").read_text() if (ws / "AGENTS.md").is_file() else "")
    assert all(isinstance(x, str) for x in rec["framework"]["stripped"])


def test_report_groups_by_everything_that_changes_a_run(dirs, capsys):
    _run("qa-01", "gold", dirs)
    _run("qa-01", "gold", dirs)
    records, bad = load_records(dirs["results_dir"])
    assert bad == []
    text = report(records)
    assert "Harness validation (gold/noop: not agent results)" in text
    assert "Agent results" not in text
    tree = records[0]["framework"]["tree_sha256"][:12]
    version = records[0]["framework"]["version"]
    assert f"| qa-01 | - | pithtrain | repo | {version} | {tree} | gold | default | kept | - | 2 | 2/2 |" in text
    # Another model or another tree hash is another row, never one median.
    other = json.loads(json.dumps(records[1]))
    other["agent"]["model"], other["framework"]["tree_sha256"] = "m2", "f" * 64
    other["verdict"]["status"] = "ERROR"
    text = report([records[0], other])
    assert f"| {tree} | gold | default | kept | - | 1 | 1/1 |" in text
    assert "| ffffffffffff | gold | m2 | kept | - | 1 | 0/1 (1 checker error) |" in text
    # A run given the skills overlay is its own row, never a median with runs without it.
    overlaid = json.loads(json.dumps(records[1]))
    overlaid["framework"]["skills_overlay"] = ["capture-profile"]
    text = report([records[0], overlaid])
    assert f"| {tree} | gold | default | kept | - | 1 | 1/1 |" in text
    assert f"| {tree} | gold | default | kept | capture-profile | 1 | 1/1 |" in text


def test_skills_overlay_is_refused_where_it_means_nothing(dirs):
    # pithtrain ships the skill; --no-skills removes skills: either with the overlay is a mistake, nothing made.
    with pytest.raises(ValueError, match="--skills-overlay with framework 'pithtrain'"):
        _run("qa-01", "noop", dirs, skills_overlay=("capture-profile",))
    with pytest.raises(ValueError, match="--skills-overlay with --no-skills"):
        _run("qa-01", "noop", dirs, skills=False, skills_overlay=("capture-profile",))
    assert not Path(dirs["work_root"]).exists() and not Path(dirs["results_dir"]).exists()


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


def test_run_from_the_repo_root_with_the_default_results_dir(tmp_path):
    """The relative default --results-dir: the checker runs in the workspace, so every path must be absolute."""
    run_ids = []
    try:
        for agent, status in (("gold", 0), ("noop", 1)):
            cmd = [sys.executable, "-m", "ate_bench", "--tasks-dir", str(TOY_TASKS), "run", "--task", "qa-02"]
            cmd += ["--framework", "pithtrain", "--agent", agent, "--work-root", str(tmp_path / "work")]
            done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
            run_ids += re.findall(r"\] (qa-02_\S+): ", done.stdout)
            assert done.returncode == status, done.stdout + done.stderr
            assert re.search(r"session_s=\d+\.\d\n", done.stdout), done.stdout  # rounded
        record = Path("results") / "ate" / run_ids[0] / "record.json"
        rec = json.loads((REPO_ROOT / record).read_text())
        assert rec["verdict"]["status"] == "PASS"
        assert Path(rec["workspace"]).is_absolute() and Path(rec["transcript"]).is_absolute()
        # check --record with a relative path, from the repo root: the verdict once, exit 0.
        cmd = [sys.executable, "-m", "ate_bench", "check", "--record", str(record)]
        done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[0] == "PASS" and done.stdout.count("PASS") == 1
    finally:
        for run_id in run_ids:
            shutil.rmtree(REPO_ROOT / "results" / "ate" / run_id, ignore_errors=True)


def test_agent_and_checker_tmpdirs_are_short_enough_for_unix_sockets(tmp_path):
    """AF_UNIX paths stop at 107 bytes, and multiprocessing binds its sockets under TMPDIR: one deep in the work root
    hung Megatron-LM's trainer. Here the gold and the checker each bind one, with the work root and the results
    over 120 characters deep."""
    task_dir = _copy_task(tmp_path, "toy-train", "operate")
    bind = "from multiprocessing.connection import Listener; Listener(family='AF_UNIX').close()"
    solve = task_dir / "gold" / "pithtrain" / "solve.sh"
    solve.write_text(solve.read_text() + f'python3 -c "{bind}"\n')
    check = task_dir / "check.py"
    check.write_text(f"{bind}\n" + check.read_text())
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    task = load_tasks(tmp_path / "tasks")["operate-01"]
    opts = RunOptions(task=task, framework="pithtrain", agent="gold", results_dir=deep / "r", work_root=deep / "w")
    rec = json.loads(run_once(opts).read_text())
    assert rec["verdict"]["status"] == "PASS", rec["verdict"]
    assert rec["exit"]["returncode"] == 0


def test_a_checker_that_raises_is_an_error_with_its_traceback(tmp_path, dirs, capsys):
    task_dir = _copy_task(tmp_path, "toy-cli")
    (task_dir / "check.py").write_text("raise RuntimeError('checker bug')\n")
    argv = ["--tasks-dir", str(tmp_path / "tasks"), "run", "--task", "qa-02", "--framework", "pithtrain"]
    argv += ["--agent", "gold", "--results-dir", str(dirs["results_dir"]), "--work-root", str(dirs["work_root"])]
    assert main(argv) == 3
    assert "ERROR: checker raised (exit 1): RuntimeError: checker bug" in capsys.readouterr().out
    (rec,) = load_records(dirs["results_dir"])[0]
    assert rec["verdict"]["status"] == "ERROR" and not rec["verdict"]["passed"]
    assert "Traceback (most recent call last)" in rec["verdict"]["traceback"]
    # A checker that exits 0 without PASS breaks its contract: ERROR too, never the agent's FAIL.
    (task_dir / "check.py").write_text("print('looks fine')\n")
    assert main(argv) == 3
    assert "checker exited 0 without a lone PASS" in capsys.readouterr().out


def test_check_record_uses_the_task_dir_it_names(dirs, tmp_path, capsys):
    rec = _run("qa-02", "gold", dirs)
    record = dirs["results_dir"] / rec["run_id"] / "record.json"
    empty = tmp_path / "no-tasks-here"
    empty.mkdir()
    # Options after the subcommand are accepted too.
    assert main(["check", "--record", str(record), "--tasks-dir", str(empty)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "PASS" and out.count("PASS") == 1
    (Path(rec["workspace"]) / "pithtrain" / "__main__.py").write_text("# gone\n")
    assert main(["check", "--record", str(record)]) == 1
    assert capsys.readouterr().out.startswith("FAIL: ")


def test_list_says_where_it_looked(tmp_path, capsys):
    assert main(["list", "--tasks-dir", str(tmp_path / "none")]) == 0
    assert f"no tasks under {tmp_path / 'none'} (looked for <category>/<slug>/task.toml" in capsys.readouterr().out
    assert main(["--tasks-dir", str(TOY_TASKS), "list"]) == 0
    assert "profiles=smoke,gpu1,paper" in capsys.readouterr().out


def test_a_profile_needs_its_gpus(dirs, capsys):
    argv = ["--tasks-dir", str(TOY_TASKS), "run", "--task", "operate-01", "--framework", "pithtrain"]
    argv += ["--agent", "gold", "--profile", "gpu1", "--work-root", str(dirs["work_root"])]
    assert main(argv + ["--results-dir", str(dirs["results_dir"])]) == 2
    assert "profile 'gpu1' needs 1 GPU(s); this machine has 0" in capsys.readouterr().err
    assert not dirs["work_root"].exists() and not dirs["results_dir"].exists()


def test_a_failed_start_leaves_no_workspace(dirs, monkeypatch):
    def broken(*args):
        raise MaterializeError("archive failed")

    monkeypatch.setattr(workspace, "_from_repo", broken)
    with pytest.raises(MaterializeError):
        _run("qa-01", "gold", dirs)
    assert list(dirs["work_root"].iterdir()) == []


def test_neither_cli_nor_key_says_both():
    task = load_tasks(TOY_TASKS)["qa-01"]
    with pytest.raises(CannotStart) as err:
        make_launch("claude-code", task, "pithtrain", "q", Path("/w"), Path("/r"), "", {"PATH": "/nonexistent"})
    assert "'claude' is not on PATH" in str(err.value)
    assert "no credentials: set one of ANTHROPIC_API_KEY" in str(err.value)


def test_dirty_paths_ignore_results_and_are_listed():
    probe = REPO_ROOT / "results" / "ate" / "dirty-probe.txt"
    mine = REPO_ROOT / "tests" / "fixtures" / "ate" / "dirty-probe.txt"
    probe.parent.mkdir(parents=True, exist_ok=True)
    try:
        probe.write_text("x")
        mine.write_text("x")
        _, dirty = repo_state()
        assert "tests/fixtures/ate/dirty-probe.txt" in dirty
        assert not any(p.startswith("results/") for p in dirty)
    finally:
        probe.unlink()
        mine.unlink()


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


def test_a_bad_record_is_named_and_the_report_goes_on(dirs, capsys):
    _run("qa-02", "gold", dirs)
    results = dirs["results_dir"]
    for name, text in (("truncated", '{"schema": "ate-bench-run-1", "run'), ("empty-verdict", None), ("binary", None)):
        (results / name).mkdir()
        if name == "binary":
            (results / name / "record.json").write_bytes(b"\xff\xfe\x00junk")
        elif name == "empty-verdict":
            (results / name / "record.json").write_text(json.dumps({"schema": "ate-bench-run-1", "verdict": {}}))
        else:
            (results / name / "record.json").write_text(text)
    assert main(["report", "--results-dir", str(results)]) == 2
    out, err = capsys.readouterr()
    assert "| qa-02 |" in out and "| 1 | 1/1 |" in out  # the good record still makes its row
    lines = err.splitlines()
    assert len(lines) == 3, err
    for name in ("binary", "empty-verdict", "truncated"):
        (line,) = [x for x in lines if f"{results / name / 'record.json'}: not a run record" in x]
        assert line.endswith("left out of the report")


def test_a_broken_task_elsewhere_does_not_stop_a_run(tmp_path, dirs, capsys):
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    (tasks / "qa" / "half-written").mkdir()
    (tasks / "qa" / "half-written" / "task.toml").write_text('id = "qa-09"\ntitle = \n')
    (tasks / "operate" / "bad").mkdir()
    (tasks / "operate" / "bad" / "task.toml").write_text('id = "operate-07"\nunknown_field = 1\n')
    argv = ["--tasks-dir", str(tasks), "run", "--task", "qa-02", "--framework", "pithtrain", "--agent", "gold"]
    argv += ["--results-dir", str(dirs["results_dir"]), "--work-root", str(dirs["work_root"])]
    assert main(argv) == 0, capsys.readouterr()
    # The broken one itself still says what is wrong with it, in one line.
    assert main([*argv[:4], "operate-07", *argv[5:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown field 'unknown_field'" in err
    assert main([*argv[:4], "qa-99", *argv[5:]]) == 2
    err = capsys.readouterr().err
    assert "no task 'qa-99'" in err and f"give no id: {tasks / 'qa' / 'half-written' / 'task.toml'}" in err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--repeat", "0"], "--repeat 0 is not allowed: give the number of runs, at least 1"),
        (["--repeat", "-2"], "--repeat -2 is not allowed"),
        (["--time-limit-s", "-5"], "--time-limit-s -5 is not allowed: give a number of seconds > 0"),
        (["--time-limit-s", "0"], "--time-limit-s 0 is not allowed"),
        (["--time-limit-s", "nan"], "--time-limit-s nan is not allowed"),
    ],
)
def test_bad_run_counts_and_limits_get_one_line(flags, message, dirs, capsys):
    argv = ["--tasks-dir", str(TOY_TASKS), "run", "--task", "qa-02", "--framework", "pithtrain", "--agent", "gold"]
    argv += ["--results-dir", str(dirs["results_dir"]), "--work-root", str(dirs["work_root"]), *flags]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert not dirs["results_dir"].exists() and not dirs["work_root"].exists()


def test_megatron_checkers_get_the_pin_git_mode_reads_from_the_runs_cache(tmp_path, monkeypatch):
    """The operate checkers read Megatron-LM's pin from what run_checker hands them: the run's own --cache-dir (a
    mirror only if it holds the commit, else a carried archive), or ATE_MEGATRON_SOURCE; other frameworks get none."""
    monkeypatch.delenv("ATE_MEGATRON_SOURCE", raising=False)
    git = tmp_path / "git"
    (git / "megatron-lm.git").mkdir(parents=True)  # a mirror without the pinned commit
    assert runner._checker_pinned_source("megatron-lm", tmp_path) is None
    archive = git / f"megatron-lm-{workspace.FRAMEWORKS['megatron-lm'].git_commit}.tar.xz"
    archive.write_bytes(b"")
    assert runner._checker_pinned_source("megatron-lm", tmp_path) == archive.resolve()
    assert runner._checker_pinned_source("torchtitan", tmp_path) is None
    monkeypatch.setenv("ATE_MEGATRON_SOURCE", str(tmp_path / "elsewhere.tar.xz"))
    assert runner._checker_pinned_source("megatron-lm", tmp_path) is None  # named but absent
