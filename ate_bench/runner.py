"""One run: materialize, launch the agent under its time limit, check, measure, write the record.

A run record is `results/ate/<run_id>/record.json`, next to the stamped stream, the agent's transcript,
the workspace diff and the checker's log. The workspace itself stays under the work root (outside this
repository: Claude Code reads CLAUDE.md files in every parent of its working directory) so `check` can
re-run a checker on it. The agent and the checker run in the sandbox of sandbox.py unless the user
passed --no-sandbox (the record says which).
"""

import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import platform
import re
import secrets
import shutil
import stat
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ate_bench import agents, sandbox
from ate_bench.gpu import GpuSampler, SampleSource, gpu_inventory, nvidia_smi_source
from ate_bench.metrics import METRIC_COLUMNS, GpuUsage, Metrics, compute_metrics
from ate_bench.procs import ProcessResult, make_tree_predicate, run_process_tree
from ate_bench.scripted_endpoint import ScriptedEndpoint, load_trajectory, parse_trajectory
from ate_bench.tasks import TaskSpec
from ate_bench.trajectories import gold_trajectory
from ate_bench.workspace import (
    DEFAULT_CACHE_DIR,
    REPO_ROOT,
    Workspace,
    baseline_commit,
    materialize,
    pinned_git_source,
    restore_baseline,
    restore_git_config,
    tree_sha256,
    workspace_diff,
)

RECORD_SCHEMA = "ate-bench-run-1"
PIPELINE_CHECK = "pipeline-check"
PIPELINE_CHECK_LABEL = "pipeline check: scripted model, not an agent result"
REQUESTS_FILE = "requests.jsonl"
SCRIPTED_TRAJECTORY_FILE = "scripted_trajectory.json"
AGENT_STDERR_TAIL = 2000
DEFAULT_WORK_ROOT = Path(tempfile.gettempdir()) / "ate-bench"
# Passed to the agent and the checker by name; nothing else from the caller's environment is.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES")
BASE_ENV += ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
# AF_UNIX socket paths stop at 107 bytes, and Python's multiprocessing (DataLoader workers, Megatron-LM's data
# queue) binds its sockets under TMPDIR: a TMPDIR deep in the work root or the results hung Megatron-LM's trainer on
# the H200 (its queue's feeder thread died with "AF_UNIX path too long"; the main process waited forever). So each
# agent, gold script and checker gets a fresh short TMPDIR here, removed when it ends.
SHORT_TMP_ROOT = Path("/tmp") if os.path.isdir("/tmp") else Path(tempfile.gettempdir())
NO_SANDBOX = "no sandbox: {why}; pass --no-sandbox to run without one (the record says so)"


@dataclass
class RunOptions:
    task: TaskSpec
    framework: str
    agent: str
    results_dir: Path
    model: str = ""
    """Passed to the agent's CLI; empty: the agent's default."""
    skills: bool = True
    """Keep skills (skills/, .claude/skills, the AGENTS.md section); False strips them."""
    source_mode: str = "auto"
    work_root: Path = DEFAULT_WORK_ROOT
    cache_dir: Path = DEFAULT_CACHE_DIR
    time_limit_s: float | None = None
    """Overrides the task's time_limit_min (harness debugging)."""
    pass_env: tuple[str, ...] = ()
    """Extra variable names passed to the agent (recorded by name)."""
    profile: str = ""
    """The task's profile ("" for a task without profiles; see TaskSpec.check_profile)."""
    gpu_source: SampleSource = nvidia_smi_source
    sandbox: bool = True
    """Run the agent and the checker in the sandbox (sandbox.py); False only by the user's explicit flag."""
    skills_overlay: tuple[str, ...] = ()
    """This repository's skills given to a torchtitan or megatron-lm workspace (the authors' harness gave them the
    profile-capture skill); recorded, and reported apart."""
    scripted: str = ""
    """A pipeline check, not an agent result: the agent talks to a scripted endpoint (scripted_endpoint.py)
    replaying this trajectory file, or "gold" for the trajectory made from the task's gold (trajectories.py)."""


@dataclass
class Verdict:
    status: str
    """PASS, FAIL (the answer's), or ERROR (the checker's: it crashed, timed out or broke its contract)."""
    reasons: list[str]
    output: str
    returncode: int
    traceback: str = ""
    """The checker's stderr tail when the verdict is ERROR."""

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def line(self) -> str:
        return self.status if self.passed else f"{self.status}: " + "; ".join(self.reasons)


class TaskFiles:
    """A task's files and its category's (helpers, provided files; not the other tasks'), read before the
    agent starts. `restore()` compares them with the disk, puts back whatever changed, was removed or was
    added, and names those paths: a run whose checker or key changed under it is never judged by them."""

    def __init__(self, task: TaskSpec):
        self.task, self.root = task, task.dir.parent.parent
        self.saved = self._read()

    def _paths(self) -> list[Path]:
        category = self.task.dir.parent
        others = [t.parent for t in category.glob("*/task.toml") if t.parent != self.task.dir]
        files = [p for p in category.rglob("*") if p.is_symlink() or p.is_file()]
        return sorted(p for p in files if not any(o in p.parents for o in others))

    def _read(self) -> dict[Path, tuple[int, bytes]]:
        out = {}
        for p in self._paths():
            st = p.lstat()
            out[p] = (st.st_mode, os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
        return out

    def restore(self) -> list[str]:
        now = self._read()
        changed = sorted(p for p in {*self.saved, *now} if self.saved.get(p) != now.get(p))
        for p in changed:
            if p.is_symlink() or p.exists():
                p.unlink()
            if p in self.saved:
                mode, data = self.saved[p]
                if stat.S_ISLNK(mode):
                    os.symlink(data.decode(), p)
                else:
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_bytes(data)
                    p.chmod(stat.S_IMODE(mode))
        return [p.relative_to(self.root).as_posix() for p in changed]


VERDICT_EXIT = {"PASS": 0, "FAIL": 1, "ERROR": 3}
"""`run` and `check` exit status per verdict; 2 is "could not start" (nothing recorded)."""


def _minimal_env(names: tuple[str, ...], home: Path, tmp: Path) -> dict[str, str]:
    env = {n: os.environ[n] for n in names if n in os.environ}
    return {**env, "HOME": str(home), "TMPDIR": str(tmp)}


@contextlib.contextmanager
def short_tmpdir(prefix: str) -> Iterator[Path]:
    """A fresh TMPDIR under SHORT_TMP_ROOT for one process tree, removed after it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=SHORT_TMP_ROOT))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _checker_packages() -> list[Path]:
    """pithtrain as the harness's Python imports it: operate checkers import it, and an editable install (a
    nox session's `pip install -e .`) points into this checkout, which the sandbox hides: operate-02's
    checker then raised "No module named 'pithtrain.config'" under `nox -s ate`."""
    spec = importlib.util.find_spec("pithtrain")  # a namespace package: its folders, no origin
    return [Path(p) for p in (spec.submodule_search_locations or []) if os.path.isdir(p)] if spec else []


def _checker_pinned_source(framework: str, cache_dir: Path) -> Path | None:
    """Megatron-LM's pinned source for its checkers (tasks/operate/operate_check.pinned_megatron): the caller's
    ATE_MEGATRON_SOURCE, else what git mode reads offline; under the checker's HOME and sandbox it would find
    neither on its own."""
    if framework != "megatron-lm":
        return None
    named = os.environ.get("ATE_MEGATRON_SOURCE")
    found = Path(named) if named else pinned_git_source(framework, cache_dir)
    return found.resolve() if found and found.exists() else None


def run_checker(
    task: TaskSpec,
    framework: str,
    workspace: Path,
    answer: Path,
    log_dir: Path,
    profile: str = "",
    isolated: bool = True,
    extra_args: tuple[str, ...] = (),
    cache_dir: Path = DEFAULT_CACHE_DIR,
) -> Verdict:
    """`check.py --workspace W --framework F --answer A [--profile P] [extra_args]` in W, every path absolute,
    in a sandbox (unless not `isolated`) that writes only W and the checker's HOME and reads its category's
    task files and the answer.

    PASS: exit 0 and a `PASS` line; FAIL: exit 1 and `FAIL: ...` lines. Anything else (a traceback,
    another exit status, a timeout, neither or both kinds of line) is ERROR: the checker's fault.
    """
    if isolated and sandbox.unavailable():
        raise agents.CannotStart(NO_SANDBOX.format(why=sandbox.unavailable()))
    workspace, answer, log_dir = workspace.resolve(), answer.resolve(), log_dir.resolve()
    lines: list[str] = []
    # A Q&A checker is standard library only: -S (no site-packages) holds it to that, and starts in a
    # fraction of the time, which the validation matrix's hundreds of checks feel.
    python = [sys.executable, "-S"] if task.category == "qa" else [sys.executable]
    argv = [*python, str(task.checker), "--workspace", str(workspace), "--framework", framework]
    argv += ["--answer", str(answer)] + (["--profile", profile] if profile else []) + list(extra_args)
    home = log_dir / "check-home"
    home.mkdir(parents=True, exist_ok=True)
    with short_tmpdir("ate-check-") as tmp:
        env = {**_minimal_env(BASE_ENV, home, tmp), "PYTHONDONTWRITEBYTECODE": "1"}
        pinned = _checker_pinned_source(framework, cache_dir)
        if pinned:  # the operate checkers read Megatron-LM's pin from it, never from the workspace
            env["ATE_MEGATRON_SOURCE"] = str(pinned)
        if isolated:
            hidden = _hidden(task.dir.parent.parent, log_dir, workspace.parent)
            readable = [task.dir.parent, answer, *_checker_packages(), *([pinned] if pinned else [])]
            box = sandbox.make_sandbox([workspace, home, tmp], readable, hidden, env.get("PATH", ""), argv[0])
            argv = sandbox.wrap(argv, box)
        done = run_process_tree(
            argv,
            cwd=workspace,
            env=env,
            time_limit_s=task.check_time_limit_min * 60,
            on_line=lambda t, line: lines.append(line),
            stderr_path=log_dir / "check.stderr",
        )
    output = "\n".join(lines)
    (log_dir / "check.log").write_text(output + "\n")
    stderr = (log_dir / "check.stderr").read_text(errors="replace")
    fails = [line.removeprefix("FAIL").lstrip(": ").strip() for line in lines if line.startswith("FAIL")]
    has_pass = any(line.strip() == "PASS" for line in lines)
    error = ""
    if done.timed_out:
        error = f"checker ran past its {task.check_time_limit_min:g} min limit"
    elif "Traceback (most recent call last)" in stderr:
        error = f"checker raised (exit {done.returncode})"
    elif done.returncode not in (0, 1):
        error = f"checker exited {done.returncode}"
    elif done.returncode == 0 and (not has_pass or fails):
        error = "checker exited 0 without a lone PASS"
    elif done.returncode == 1 and (has_pass or not fails):
        error = "checker exited 1 without FAIL lines" if not fails else "checker printed both PASS and FAIL"
    if error:
        tail = stderr.strip()[-4000:]
        last = tail.splitlines()[-1] if tail else "(no stderr)"
        return Verdict("ERROR", [f"{error}: {last}"], output, done.returncode, traceback=tail)
    if done.returncode == 0:
        return Verdict("PASS", [], output, 0)
    return Verdict("FAIL", fails, output, 1)


def verdict_record(v: Verdict) -> dict:
    return {
        "status": v.status,
        "passed": v.passed,
        "reasons": v.reasons,
        "checker_exit": v.returncode,
        "traceback": v.traceback,
    }


# A provided script's log (notes/qa_format.md): artifacts/<name>-<YYYYMMDD-HHMMSS>.log, closed by a trap's
# `exit-time: <unix seconds>` line.
SCRIPT_LOG = re.compile(r"(?P<name>[A-Za-z0-9_]+)-(?P<stamp>\d{8}-\d{6})\.log")
EXIT_TIME = re.compile(r"^exit-time: (?P<t>\d+(?:\.\d+)?)\s*$", re.MULTILINE)


def script_logs(workspace: Path) -> dict:
    """The provided scripts' runs, from their logs: start (the name's stamp, local time), exit-time, seconds.

    A log without an exit-time line (a run killed with SIGKILL, or still running) is listed apart and
    its time is not counted, never silently dropped.
    """
    runs = []
    for path in sorted((workspace / "artifacts").glob("*.log")):
        m = SCRIPT_LOG.fullmatch(path.name)
        if m is None or path.is_symlink() or not path.is_file():
            continue  # a link is never followed: it could point at anything the harness can read
        started = time.mktime(time.strptime(m["stamp"], "%Y%m%d-%H%M%S"))
        ends = EXIT_TIME.findall(path.read_text(errors="replace"))
        end = float(ends[-1]) if ends else None
        runs.append(
            {
                "log": path.relative_to(workspace).as_posix(),
                "script": m["name"],
                "started": started,
                "exit_time": end,
                "seconds": round(end - started, 1) if end is not None else None,
            }
        )
    missing = [r["log"] for r in runs if r["exit_time"] is None]
    return {
        "runs": runs,
        "seconds_total": round(sum(r["seconds"] for r in runs if r["seconds"] is not None), 1),
        "without_exit_time": missing,
    }


def host_info() -> dict[str, object]:
    return {
        "node": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "gpus": gpu_inventory(),
    }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


@dataclass
class _Plan:
    """What a run will be, decided before anything is made."""

    run_id: str
    work: Path
    """work_root/run_id: the workspace, the agent's HOME and outbox (its TMPDIR is short_tmpdir's)."""
    run_dir: Path
    profile: str
    prompt: str
    launch: agents.AgentLaunch
    time_limit_s: float
    endpoint: ScriptedEndpoint | None
    """The scripted model (a pipeline check): bound to its port here, serving while the agent runs."""

    @property
    def outbox(self) -> Path:
        """Where the agent's CLI writes its own files (codex's last message, mini's trajectory)."""
        return self.work / "out"


@dataclass
class _Before:
    """What the harness reads before the agent starts, to hold the run to it afterwards."""

    task_files: TaskFiles
    hashes: dict[str, str]
    """sha256 of what decides the verdict (the record's task.files)."""
    tree_sha256: str
    commit: str
    """The workspace's baseline commit."""
    git_config: bytes


def run_once(opts: RunOptions) -> Path:
    """One run of one agent on one task and framework; returns the record's path.

    Raises agents.CannotStart (nothing written) when the agent cannot run here.
    """
    plan = _plan(opts)
    ws = _make_workspace(opts, plan)
    git_config = (ws.path / ".git" / "config").read_bytes()
    hashes = opts.task.file_hashes(opts.framework)
    before = _Before(TaskFiles(opts.task), hashes, tree_sha256(ws.path), baseline_commit(ws.path), git_config)
    # Phase 3: the agent, its stdout stamped line by line, GPUs sampled while it runs.
    with short_tmpdir("ate-agent-") as tmp:
        env = {**_minimal_env(BASE_ENV + opts.pass_env, plan.work / "home", tmp), **plan.launch.env}
        box = _agent_sandbox(opts, plan, ws.path, tmp, env.get("PATH", "")) if opts.sandbox else None
        proc, gpu = _launch_agent(opts, plan, ws.path, env, box)

    # Phase 4: transcript -> metrics; diff (before the checker, which may write); verdict.
    transcript, metrics, metric_error, answer = _read_transcript(opts, plan, proc, gpu)
    restore_git_config(ws.path, before.git_config)  # the agent's git config must not run code as the harness
    diff, changed = workspace_diff(ws.path)
    (plan.run_dir / "workspace.diff").write_text(diff)
    logs = script_logs(ws.path)  # before the checker, which may run the scripts itself
    verdict = _judge(opts, plan, ws.path, answer, before, changed)

    notes = _notes(logs, proc, plan)
    record = {
        "schema": RECORD_SCHEMA,
        "run_id": plan.run_id,
        "task": _task_record(opts.task, plan, before.hashes),
        "framework": _framework_record(ws),
        "agent": _agent_record(opts, plan, transcript, env),
        "sandbox": box.record() if box else {"isolated": False, "why": "--no-sandbox"},
        "metrics": dataclasses.asdict(metrics) if metrics else None,
        "metrics_error": metric_error,
        "script_logs": logs,
        "verdict": verdict_record(verdict),
        "exit": {"returncode": proc.returncode, "timed_out": proc.timed_out, "time_limit_s": plan.time_limit_s},
        "agent_error": _agent_error(opts.agent, proc, metrics, plan.run_dir / "agent.stderr"),
        "scripted": _scripted_record(opts.scripted, plan.endpoint, plan.run_dir),
        "notes": notes,
        "workspace": str(ws.path),
        "workspace_diff": diff,
        "changed_paths": changed,
        "transcript": str(plan.run_dir / _transcript_name(opts.agent)),
        "host": host_info(),
        "started_at": _iso(proc.start),
        "ended_at": _iso(proc.end),
    }
    path = plan.run_dir / "record.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _plan(opts: RunOptions) -> _Plan:
    """Phase 1: can the agent start at all? Nothing is created before this passes."""
    task = opts.task
    if opts.framework not in task.frameworks:
        raise ValueError(f"task {task.id} is not valid for {opts.framework!r}; valid: {', '.join(task.frameworks)}")
    limit = opts.time_limit_s
    if limit is not None and not (math.isfinite(limit) and limit > 0):
        raise ValueError(f"--time-limit-s {limit:g} is not allowed: give a number of seconds > 0")
    profile = task.check_profile(opts.profile)
    if opts.skills_overlay and (opts.framework == "pithtrain" or not opts.skills):
        clash = f"framework {opts.framework!r}" if opts.skills else "--no-skills"
        raise ValueError(
            f"--skills-overlay with {clash}: the overlay gives torchtitan or megatron-lm pithtrain's skills; "
            "pithtrain has them already and --no-skills removes skills"
        )
    need, have = task.gpus_for(profile), len(gpu_inventory())
    if need > have:
        what = f"profile {profile!r}" if profile else f"task {task.id}"
        raise agents.CannotStart(f"{what} needs {need} GPU(s); this machine has {have}")
    if opts.sandbox and sandbox.unavailable():
        raise agents.CannotStart(NO_SANDBOX.format(why=sandbox.unavailable()))
    # Every path handed out (to the checker, the agent, the record) is absolute: they run elsewhere.
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    skills = "skills" if opts.skills else "noskills"
    size = f"{profile}_" if profile else ""
    run_id = f"{task.id}_{size}{opts.framework}_{opts.agent}_{skills}_{stamp}_{secrets.token_hex(2)}"
    work, run_dir = opts.work_root.resolve() / run_id, opts.results_dir.resolve() / run_id
    prompt = task.instruction(opts.framework, profile)
    outbox = work / "out"  # _Plan.outbox
    turns = load_trajectory(Path(opts.scripted)) if opts.scripted not in ("", "gold") else []  # "gold": phase 2
    endpoint = ScriptedEndpoint(turns, work / "workspace", run_dir / REQUESTS_FILE) if opts.scripted else None
    try:
        launch = agents.make_launch(
            opts.agent, task, opts.framework, prompt, work / "workspace", outbox, opts.model, dict(os.environ),
            profile, endpoint=endpoint.base_url if endpoint else "", in_sandbox=opts.sandbox,
        )  # fmt: skip
    except BaseException:
        if endpoint:
            endpoint.close()
        raise
    time_limit_s = limit if limit is not None else task.time_limit_min * 60
    return _Plan(run_id, work, run_dir, profile, prompt, launch, time_limit_s, endpoint)


def _make_workspace(opts: RunOptions, plan: _Plan) -> Workspace:
    """Phase 2: a fresh workspace, the agent's own HOME and outbox (no user-level instruction files)."""
    try:
        ws = materialize(
            opts.framework,
            plan.work / "workspace",
            mode=opts.source_mode,
            skills=opts.skills,
            prepare_dir=opts.task.prepare_dir(opts.framework, plan.profile),
            cache_dir=opts.cache_dir,
            skills_overlay=opts.skills_overlay,
        )
        if opts.scripted == "gold":
            trajectory = gold_trajectory(opts.task, opts.framework, plan.profile, ws.path)
            plan.endpoint.model.turns = parse_trajectory(trajectory, f"the gold of {opts.task.id}")
    except BaseException:
        shutil.rmtree(plan.work, ignore_errors=True)
        if plan.endpoint:
            plan.endpoint.close()
        raise
    for d in (plan.work / "home", plan.outbox, plan.run_dir):
        d.mkdir(parents=True, exist_ok=True)
    return ws


def _hidden(*more: Path) -> list[Path]:
    """What no sandbox shows: this checkout, the caller's HOME (credentials, caches), the system temp
    directories (other users' and runs' files, the other processes' short TMPDIRs) and `more`."""
    temps = dict.fromkeys([Path(tempfile.gettempdir()), SHORT_TMP_ROOT])
    return [REPO_ROOT, Path.home(), *temps, *more]


def _agent_sandbox(opts: RunOptions, plan: _Plan, workspace: Path, tmp: Path, path_env: str) -> sandbox.Sandbox:
    """Writes: its workspace, HOME, TMPDIR and outbox. Hidden: the tasks (but the gold's own directory,
    for the `gold` agent), the results, every other run."""
    writable = [workspace, plan.work / "home", tmp, plan.outbox]
    readable = [opts.task.gold_script(opts.framework).parent] if opts.agent == "gold" else []
    readable += plan.launch.readable
    hidden = _hidden(opts.task.dir.parent.parent, opts.results_dir, opts.work_root, opts.cache_dir)
    return sandbox.make_sandbox(writable, readable, hidden, path_env, plan.launch.argv[0])


def _launch_agent(
    opts: RunOptions, plan: _Plan, workspace: Path, env: dict[str, str], box: sandbox.Sandbox | None
) -> tuple[ProcessResult, GpuUsage]:
    sampler = GpuSampler(opts.gpu_source, is_agent_pid=lambda pid: False)

    def on_start(pid: int) -> None:
        sampler.is_agent_pid = make_tree_predicate(pid)
        sampler.start()

    argv = sandbox.wrap(plan.launch.argv, box) if box else plan.launch.argv
    with open(plan.run_dir / agents.STREAM_FILE, "w") as stream:

        def on_line(t: float, line: str) -> None:
            stream.write(json.dumps({"t": t, "line": line}) + "\n")
            stream.flush()

        with plan.endpoint or contextlib.nullcontext():
            proc = run_process_tree(
                argv, workspace, env, plan.time_limit_s, on_line, plan.run_dir / "agent.stderr", on_start=on_start
            )
    return proc, sampler.stop()


def _read_transcript(opts: RunOptions, plan: _Plan, proc: ProcessResult, gpu: GpuUsage) -> tuple:
    """(transcript, metrics, metrics error, answer path): the agent's outbox files are copied in first
    (plain files only: a link would make the harness copy whatever it points at)."""
    for name in (agents.FINAL_MESSAGE_FILE, agents.TRAJECTORY_FILE):
        made = plan.outbox / name
        if made.is_file() and not made.is_symlink():
            shutil.copyfile(made, plan.run_dir / name)
    agents.collect_transcript(opts.agent, plan.work / "home", plan.run_dir)
    metrics, transcript, metric_error = None, None, ""
    try:
        transcript = agents.parse_transcript(opts.agent, plan.run_dir)
        metrics = compute_metrics(transcript, proc.start, proc.end, gpu)
    except (ValueError, KeyError, TypeError, FileNotFoundError) as e:
        metric_error = f"{type(e).__name__}: {e}"
    answer = plan.run_dir / agents.FINAL_MESSAGE_FILE
    if not answer.is_file():
        answer.write_text(transcript.final_message if transcript else "")
    return transcript, metrics, metric_error, answer


def _judge(
    opts: RunOptions, plan: _Plan, workspace: Path, answer: Path, before: _Before, changed: list[str]
) -> Verdict:
    """The checker's verdict, unless the harness's own rules decide: task files are compared and restored
    before the checker (a rewritten checker never runs) and after it (ERROR either way); a read-only
    workspace that changed is reset to its baseline for the checker, and the verdict is FAIL."""
    edited = opts.task.tools == "read-only" and tree_sha256(workspace) != before.tree_sha256
    if edited:
        restore_baseline(workspace, before.commit)  # a Q&A answer is checked against the tree the agent was given
    tampered = before.task_files.restore()
    verdict = run_checker(
        opts.task, opts.framework, workspace, answer, plan.run_dir, plan.profile, opts.sandbox, cache_dir=opts.cache_dir
    )
    tampered += [p for p in before.task_files.restore() if p not in tampered]
    if edited:
        verdict = _edited_read_only(verdict, changed, tree_sha256(workspace) == before.tree_sha256)
    if tampered:
        why = f"task files changed during the run (restored): {', '.join(tampered)}"
        verdict = Verdict("ERROR", [why, *verdict.reasons], verdict.output, verdict.returncode, verdict.traceback)
    return verdict


def _edited_read_only(verdict: Verdict, changed: list[str], restored: bool) -> Verdict:
    """An edit of a read-only workspace fails the answer, whatever the checker said of the pristine tree."""
    what = ", ".join(changed[:20]) or "its tree hash differs (files git does not see)"
    why = f"read-only task, but the agent changed the workspace: {what}"
    if not restored:
        why += "; restoring the baseline did not give the pristine tree back"
        return Verdict("ERROR", [why, *verdict.reasons], verdict.output, verdict.returncode, verdict.traceback)
    why += "; the checker ran on the pristine tree"
    status = "ERROR" if verdict.status == "ERROR" else "FAIL"
    return Verdict(status, [why, *verdict.reasons], verdict.output, verdict.returncode, verdict.traceback)


def _notes(logs: dict, proc: ProcessResult, plan: _Plan) -> list[str]:
    notes = []
    if logs["without_exit_time"]:
        notes.append(
            f"{len(logs['without_exit_time'])} provided-script log(s) without an exit-time line (their time is "
            f"not counted): {', '.join(logs['without_exit_time'])}"
        )
    if proc.timed_out:
        notes.append(f"agent ran past the {plan.time_limit_s:.0f} s limit; its process tree was killed")
    return notes


def _task_record(task: TaskSpec, plan: _Plan, files: dict[str, str]) -> dict:
    return {
        "id": task.id,
        "category": task.category,
        "title": task.title,
        "dir": str(task.dir),
        "profile": plan.profile,
        "gpus": task.gpus_for(plan.profile),
        "files": files,
    }


def _framework_record(ws: Workspace) -> dict:
    return {
        "name": ws.framework,
        "mode": ws.mode,
        "version": ws.version,
        "tree_sha256": ws.tree_sha256,
        "source": ws.source,
        "dirty_paths": ws.dirty_paths,
        "skills": ws.skills,
        "skills_overlay": ws.skills_overlay,
        "stripped": ws.stripped,
        "prepared": ws.prepared,
        "notes": ws.notes,
    }


def _agent_record(opts: RunOptions, plan: _Plan, transcript, env: dict[str, str]) -> dict:
    return {
        "name": opts.agent,
        "kind": _agent_kind(opts),
        "version": (transcript.agent_version if transcript else "") or plan.launch.cli_version or "unknown",
        "cli_version": plan.launch.cli_version,
        "model": (transcript.model if transcript else "") or opts.model or "default",
        "argv": [a if a != plan.prompt else "<instruction.md>" for a in plan.launch.argv],
        "secrets_passed": plan.launch.secret_names,
        "env_passed": sorted(env),
    }


def _agent_kind(opts: RunOptions) -> str:
    if opts.agent in agents.HARNESS_AGENTS:
        return "harness-validation"
    elif opts.scripted:
        return PIPELINE_CHECK
    else:
        return "agent"


def _agent_error(agent: str, proc: ProcessResult, metrics: Metrics | None, stderr: Path) -> dict | None:
    """An agent that did not work as an agent: it exited non-zero (not killed at the limit) or made no model
    call. Its FAIL is then not an answer's, and `run` and `report` say so apart. None when it ran."""
    if agent in agents.HARNESS_AGENTS or proc.timed_out:
        return None
    reasons = [f"exited {proc.returncode}"] if proc.returncode != 0 else []
    reasons += ["made no model call"] if metrics is None or metrics.agent_turns == 0 else []
    if not reasons:
        return None
    tail = stderr.read_text(errors="replace").strip()[-AGENT_STDERR_TAIL:] if stderr.is_file() else ""
    return {"reasons": reasons, "stderr_tail": tail}


def _scripted_record(scripted: str, endpoint: ScriptedEndpoint | None, run_dir: Path) -> dict | None:
    if endpoint is None:
        return None
    turns = [{"action": t.action, "text": t.text, "usage": t.usage} for t in endpoint.model.turns]
    (run_dir / SCRIPTED_TRAJECTORY_FILE).write_text(json.dumps({"turns": turns}, indent=1) + "\n")
    source = "gold" if scripted == "gold" else str(Path(scripted).resolve())
    return {
        "label": PIPELINE_CHECK_LABEL,
        "trajectory": source,
        "trajectory_file": SCRIPTED_TRAJECTORY_FILE,
        "requests": REQUESTS_FILE,
        **endpoint.model.summary(),
    }


def _transcript_name(agent: str) -> str:
    if agent == "mini-swe-agent":
        return agents.TRAJECTORY_FILE
    elif agent == "codex":
        return agents.ROLLOUT_FILE
    else:
        return agents.STREAM_FILE


def load_records(results_dir: Path) -> tuple[list[dict], list[str]]:
    """(the run records under `results_dir`, one line per record.json that is not one: its path and why)."""
    records, bad = [], []
    for path in sorted(results_dir.glob("*/record.json")):
        try:
            rec = json.loads(path.read_text())
            schema = rec.get("schema") if isinstance(rec, dict) else None
            if schema != RECORD_SCHEMA:
                raise ValueError(f"schema {schema!r}, not {RECORD_SCHEMA!r}")
            _group_key(rec), _status(rec), rec["metrics"]  # what `report` reads
        except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            bad.append(f"{path}: not a run record ({e}); left out of the report")
        except (KeyError, TypeError, AttributeError) as e:
            bad.append(f"{path}: not a run record ({type(e).__name__} {e}); left out of the report")
        else:
            records.append(rec)
    return records, bad


def _group_key(rec: dict) -> tuple:
    fw, agent, task = rec["framework"], rec["agent"], rec["task"]
    return (
        agent["kind"],
        task["id"],
        task.get("profile", ""),
        fw["name"],
        fw["mode"],
        fw["version"],
        fw["tree_sha256"][:12],
        agent["name"],
        agent["model"],
        fw["skills"],
        ",".join(fw.get("skills_overlay", [])),  # records before the overlay had none
    )


def _status(rec: dict) -> str:
    v = rec["verdict"]
    return v.get("status") or ("PASS" if v["passed"] else "FAIL")  # records before the ERROR verdict


def report(records: list[dict]) -> str:
    """Medians over repeats, one row per task, profile, framework, source mode, version, tree hash,
    agent, model, skills and skills overlay (runs that differ in any of them never share a median); gold/noop
    apart."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        groups.setdefault(_group_key(rec), []).append(rec)
    header = ["task", "profile", "framework", "mode", "version", "tree", "agent", "model", "skills", "overlay"]
    header += ["runs", "pass", *(h for _, h, _ in METRIC_COLUMNS)]
    sections = []
    for kind, title in (
        ("agent", "Agent results"),
        ("harness-validation", "Harness validation (gold/noop: not agent results)"),
        (PIPELINE_CHECK, PIPELINE_CHECK_LABEL[0].upper() + PIPELINE_CHECK_LABEL[1:]),
    ):
        rows = []
        for key, recs in sorted(groups.items()):
            if key[0] != kind:
                continue
            measured = [r["metrics"] for r in recs if r["metrics"]]
            statuses = [_status(r) for r in recs]
            passed = f"{statuses.count('PASS')}/{len(recs)}"
            if statuses.count("ERROR"):
                passed += f" ({statuses.count('ERROR')} checker error)"
            agent_errors = sum(1 for r in recs if r.get("agent_error"))
            if agent_errors:
                passed += f" ({agent_errors} agent did not run: exited non-zero or made no model call)"
            cells = [k or "-" for k in key[1:]] + [str(len(recs)), passed]
            for metric, _, fmt in METRIC_COLUMNS:
                values = [m[metric] for m in measured]
                cells.append(fmt(statistics.median(values)) if values else "n/a")
            rows.append("| " + " | ".join(cells) + " |")
        if rows:
            sep = "|" + "|".join("---" for _ in header) + "|"
            sections.append(f"## {title}\n\n| " + " | ".join(header) + " |\n" + sep + "\n" + "\n".join(rows))
    return "\n\n".join(sections) + "\n" if sections else "no run records\n"
