"""The real agent CLIs (`make agents`: Claude Code, Codex, mini-swe-agent) end to end against the scripted endpoint.

Offline and keyless: each CLI talks to ate_bench/scripted_endpoint.py, which replays a trajectory made from a
task's gold (ate_bench/trajectories.py) or one of tests/fixtures/ate/trajectories/. What the harness measures
from the CLI's own transcript must equal what the endpoint served. A CLI that is not installed under .agents/
skips its tests with that reason; nothing here is reported as passed without the CLI having run.
"""

import json
import os
import re
import secrets
import statistics
import time
from pathlib import Path

import pytest

from ate_bench import runner
from ate_bench.agents import STREAM_FILE, installed_cli
from ate_bench.gpu import GpuReading
from ate_bench.runner import RunOptions, run_once
from ate_bench.tasks import load_tasks
from ate_bench.workspace import REPO_ROOT
from paper.rebuild.moba import parse_run

AGENTS = ["claude-code", "codex", "mini-swe-agent"]
# mini-swe-agent imports litellm before its first call: 4 s of CPU, 15-30 s of wall clock on a busy 2-core machine.
AGENTS_MINI_SLOW = ["claude-code", "codex", pytest.param("mini-swe-agent", marks=pytest.mark.slow)]
TRAJECTORIES = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "trajectories"
SKILL_NAME = "validate-correctness"  # one of pithtrain's skills


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    monkeypatch.setattr(runner, "gpu_inventory", lambda: [])


def _require(agent: str) -> str:
    cli, version = installed_cli(agent, os.environ.get("PATH"))
    if not version:
        pytest.skip(f"{agent}: no pinned CLI under .agents/ (run `make agents`), or another one is on PATH")
    return version


def _run(agent: str, task_id: str, tmp_path: Path, **kw) -> tuple[dict, Path, float, float]:
    """One scripted run of `agent` on pithtrain; (record, run directory, wall clock before, after)."""
    task = load_tasks(REPO_ROOT / "tasks")[task_id]
    kw = {"scripted": "gold", "results_dir": tmp_path / "results", "work_root": tmp_path / "work", **kw}
    t0 = time.time()
    path = run_once(RunOptions(task=task, framework="pithtrain", agent=agent, **kw))
    return json.loads(path.read_text()), path.parent, t0, time.time()


def _requests(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / runner.REQUESTS_FILE).read_text().splitlines()]


def _check_measured_equals_served(rec: dict, run_dir: Path, t0: float, t1: float) -> None:
    """agent_turns, output tokens and median context from the CLI's transcript equal what the endpoint served."""
    turns = json.loads((run_dir / runner.SCRIPTED_TRAJECTORY_FILE).read_text())["turns"]
    served = [r["turn"] for r in _requests(run_dir) if r["kind"] == "turn"]
    usage = [turns[min(i, len(turns) - 1)]["usage"] for i in served]
    m = rec["metrics"]
    assert m["agent_turns"] == len(served) == rec["scripted"]["turns_served"] > 0
    assert m["output_tokens"] == sum(u["output"] for u in usage), m["notes"]
    assert m["context_tokens_median"] == statistics.median(u["input"] + u["cached"] for u in usage)
    assert 0 < m["session_duration_s"] <= t1 - t0


@pytest.mark.parametrize("agent", AGENTS)
def test_qa_gold_trajectory_passes_measures_what_was_served_and_leaks_no_secret(agent, tmp_path, monkeypatch):
    version = _require(agent)
    canary = f"ate-canary-{secrets.token_hex(8)}"
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "ATE_CANARY"):
        monkeypatch.setenv(name, canary)
    rec, run_dir, t0, t1 = _run(agent, "qa-01", tmp_path)
    assert rec["verdict"]["status"] == "PASS", rec["verdict"]
    assert rec["agent_error"] is None and rec["exit"]["returncode"] == 0
    assert rec["agent"]["kind"] == "pipeline-check" and rec["agent"]["cli_version"] == version
    assert rec["agent"]["version"] == version  # the CLI's own transcript says the same version
    _check_measured_equals_served(rec, run_dir, t0, t1)
    # The files the trajectory read reached the model: their first line is in a later request.
    bodies = [json.dumps(r["body"]) for r in _requests(run_dir) if r["kind"] == "turn"]
    reads = [t["text"] for t in json.loads((run_dir / runner.SCRIPTED_TRAJECTORY_FILE).read_text())["turns"]]
    reads = reads[: len(reads) - 1]  # the last turn is the final answer
    assert reads
    for path in reads:
        once = json.dumps((Path(rec["workspace"]) / path).read_text().splitlines()[0])[1:-1]
        twice = json.dumps(once)[1:-1]  # mini-swe-agent hands the output over inside a JSON document
        assert any(once in b or twice in b for b in bodies[1:]), f"{path}: its text never reached the model"
    # The canary in the caller's environment reaches neither the model nor the workspace.
    assert canary not in (run_dir / runner.REQUESTS_FILE).read_text()
    workspace = Path(rec["workspace"])
    leaks = [p for p in workspace.rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]
    assert leaks == []


@pytest.mark.parametrize("agent", AGENTS_MINI_SLOW)
def test_no_skills_removes_the_skills_from_what_the_agent_sees(agent, tmp_path):
    _require(agent)
    trajectory = str(TRAJECTORIES / "look-for-skills.json")
    seen = {}
    for skills in (True, False):
        rec, run_dir, _, _ = _run(agent, "qa-01", tmp_path / str(skills), skills=skills, scripted=trajectory)
        assert rec["agent_error"] is None, rec["agent_error"]
        bodies = [json.dumps(r["body"]) for r in _requests(run_dir) if r["kind"] == "turn"]
        seen[skills] = [SKILL_NAME in b for b in bodies]
    # With skills, the agent read a skill's name (in its listing of skills/, and for Claude Code and Codex
    # already in its first request); without, no request ever carries it.
    assert any(seen[True]) and not any(seen[False])
    if agent != "mini-swe-agent":  # mini-swe-agent reads no AGENTS.md or skill folder on its own
        assert seen[True][0]


@pytest.mark.parametrize("agent", AGENTS_MINI_SLOW)
def test_the_agents_shell_keeps_the_callers_path(agent, tmp_path, monkeypatch):
    """Codex ran its commands in a login shell, whose /etc/profile reset PATH: the caller's environment (the
    one with torch) was lost and the operate gold's `python` was not found."""
    _require(agent)
    marker = tmp_path / "marker-bin"
    marker.mkdir()
    monkeypatch.setenv("PATH", f"{marker}:{os.environ['PATH']}")
    rec, run_dir, _, _ = _run(agent, "qa-01", tmp_path, scripted=str(TRAJECTORIES / "print-path.json"))
    bodies = "\n".join(json.dumps(r["body"]) for r in _requests(run_dir) if r["kind"] == "turn")
    paths = [p.split("\\")[0].split(":") for p in re.findall(r"PATH seen by the shell: (/[^\"]*)", bodies)]
    assert paths, "the command's output never reached the model"
    # The agent may put its own tool folders in front (Codex does); the caller's order stays.
    assert all(str(marker) in p and p.index(str(marker)) < p.index("/usr/bin") for p in paths), paths


def _left_in(work: Path) -> list[str]:
    """Processes whose working directory lies under `work` (the run's workspace and HOME)."""
    left = []
    for proc in Path("/proc").iterdir():
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if proc.name.isdigit() and cwd.startswith(str(work)):
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ")[:200]
            left.append(f"{proc.name}: {cmd!r}")
    return left


@pytest.mark.parametrize("agent", AGENTS_MINI_SLOW)
def test_a_never_ending_run_is_killed_at_the_limit_with_its_tree(agent, tmp_path):
    _require(agent)
    limit = 45.0 if agent == "mini-swe-agent" else 12.0
    rec, run_dir, t0, t1 = _run(
        agent, "qa-01", tmp_path, scripted=str(TRAJECTORIES / "never-ends.json"), time_limit_s=limit
    )
    assert rec["exit"]["timed_out"] and rec["agent_error"] is None
    assert any("limit; its process tree was killed" in n for n in rec["notes"])
    assert limit <= rec["metrics"]["session_duration_s"] <= limit + 2
    # The turn whose command was running when the limit struck was served, but Codex (its token count) and
    # mini-swe-agent (its trajectory, saved after each step) persist a turn once its tool call is done.
    served = rec["scripted"]["turns_served"]
    assert served >= 2 and served - (agent != "claude-code") <= rec["metrics"]["agent_turns"] <= served
    if agent == "claude-code":  # no result event: each response's final count, from Claude Code's session file
        assert rec["metrics"]["output_tokens"] == rec["scripted"]["output_tokens"], rec["metrics"]["notes"]
    assert _left_in(tmp_path / "work") == []


@pytest.mark.parametrize("agent", AGENTS)
def test_a_child_that_ignores_sigterm_does_not_outlive_the_run(agent, tmp_path):
    """Claude Code runs each Bash command in a session of its own: without reaper.py this child went to init.
    Run without the sandbox, whose PID namespace would end it anyway: the reaper is what `--no-sandbox` has."""
    _require(agent)
    trajectory = str(TRAJECTORIES / "ignores-sigterm.json")
    rec, run_dir, _, _ = _run(agent, "qa-01", tmp_path, scripted=trajectory, sandbox=False)
    outputs = [json.dumps(r["body"]) for r in _requests(run_dir) if r["kind"] == "turn"]
    assert any("child-started" in b for b in outputs)  # the tool call ran
    assert _left_in(tmp_path / "work") == []


def test_an_agent_that_cannot_start_is_recorded_apart_from_a_fail(tmp_path, monkeypatch):
    """Claude Code as root without IS_SANDBOX=1 exits 1 at once: an agent error with its stderr, not a FAIL."""
    _require("claude-code")
    if os.geteuid() != 0:
        pytest.skip("Claude Code refuses bypassPermissions only as root; this user is not root")
    from ate_bench import agents

    real = agents.make_launch

    def without_is_sandbox(*args, **kw):
        launch = real(*args, **kw)
        launch.env.pop("IS_SANDBOX")
        return launch

    monkeypatch.setattr(agents, "make_launch", without_is_sandbox)
    rec, run_dir, _, _ = _run("claude-code", "qa-01", tmp_path)
    err = rec["agent_error"]
    assert err["reasons"] == ["exited 1", "made no model call"]
    assert "cannot be used with root/sudo privileges" in err["stderr_tail"]
    assert rec["verdict"]["status"] == "FAIL" and rec["scripted"]["turns_served"] == 0
    report = runner.report([rec])
    assert "1 agent did not run" in report
    assert report.startswith("## Pipeline check: scripted model") and "Agent results" not in report


class _TrainingHoldsAGpu:
    """A GPU source for a machine without one: the operate run's training and evaluation processes hold a
    context on GPU 0 while they live, as they would on a GPU host."""

    def __call__(self) -> list[GpuReading]:
        pids = []
        for proc in Path("/proc").iterdir():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if proc.name.isdigit() and ("-m pithtrain train" in cmd or "evaluate.py" in cmd):
                pids.append(int(proc.name))
        return [GpuReading(0, 100.0, pids)]


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_operate_gold_trajectory_gpu_time_matches_the_exit_lines(agent, tmp_path):
    """operate-02 on smoke (about a minute): the provided train.sh and evaluate.sh log their exit-time lines; the
    sampler's active GPU time, attributed through the agent's process tree, matches the time they span."""
    _require(agent)
    rec, run_dir, t0, t1 = _run(agent, "operate-02", tmp_path, profile="smoke", gpu_source=_TrainingHoldsAGpu())
    assert rec["verdict"]["status"] == "PASS", rec["verdict"]
    _check_measured_equals_served(rec, run_dir, t0, t1)
    logs = rec["script_logs"]
    assert {r["script"] for r in logs["runs"]} == {"train", "evaluate"} and not logs["without_exit_time"]
    for run in logs["runs"]:
        assert t0 - 1 <= run["started"] <= run["exit_time"] <= t1
    # Each log's start is stamped to the second before Python starts; the sampler ticks once a second.
    assert abs(rec["metrics"]["active_gpu_s"] - logs["seconds_total"]) <= 2.0 * len(logs["runs"]) + 2.0


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_feature_gold_trajectory_applies_the_patch_and_passes(agent, tmp_path):
    """feature-01 (MoBA) on smoke: the gold patch applied through the agent's shell, verify.sh run, its log read."""
    _require(agent)
    rec, run_dir, t0, t1 = _run(agent, "feature-01", tmp_path, profile="smoke")
    assert rec["verdict"]["status"] == "PASS", rec["verdict"]
    _check_measured_equals_served(rec, run_dir, t0, t1)
    assert "pithtrain/models/deepseek_v2.py" in rec["changed_paths"]
    assert [r["script"] for r in rec["script_logs"]["runs"]] == ["verify"]
    if agent == "claude-code":  # the MoBA case study reads Claude Code's transcript: per-turn tokens, tracebacks
        turns, tracebacks = parse_run(run_dir / STREAM_FILE, rec["workspace"])
        served = json.loads((run_dir / runner.SCRIPTED_TRAJECTORY_FILE).read_text())["turns"]
        assert [t["output_tokens"] for t in turns] == [t["usage"]["output"] for t in served]
        assert [t["kind"] for t in turns] == ["run", "run", "run", "run", "explore", "other"]
        # The trajectory's wrong call of the new op: a traceback whose innermost workspace frame is MoBA's file.
        assert [tb["innermost"] for tb in tracebacks] == ["pithtrain/models/deepseek_v2.py"]
