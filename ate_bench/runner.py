"""One run: materialize, launch the agent under its time limit, check, measure, write the record.

A run record is `results/ate/<run_id>/record.json`, next to the stamped stream, the agent's transcript,
the workspace diff and the checker's log. The workspace itself stays under the work root (outside this
repository: Claude Code reads CLAUDE.md files in every parent of its working directory) so `check` can
re-run a checker on it.
"""

import contextlib
import dataclasses
import json
import os
import platform
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ate_bench import agents
from ate_bench.gpu import GpuSampler, SampleSource, gpu_inventory, nvidia_smi_source
from ate_bench.metrics import METRIC_COLUMNS, Metrics, compute_metrics
from ate_bench.procs import ProcessResult, make_tree_predicate, run_process_tree
from ate_bench.scripted_endpoint import ScriptedEndpoint, load_trajectory, parse_trajectory
from ate_bench.tasks import TaskSpec
from ate_bench.trajectories import gold_trajectory
from ate_bench.workspace import DEFAULT_CACHE_DIR, materialize, workspace_diff

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


VERDICT_EXIT = {"PASS": 0, "FAIL": 1, "ERROR": 3}
"""`run` and `check` exit status per verdict; 2 is "could not start" (nothing recorded)."""


def _minimal_env(names: tuple[str, ...], home: Path, tmp: Path) -> dict[str, str]:
    env = {n: os.environ[n] for n in names if n in os.environ}
    return {**env, "HOME": str(home), "TMPDIR": str(tmp)}


def run_checker(
    task: TaskSpec, framework: str, workspace: Path, answer: Path, log_dir: Path, profile: str = ""
) -> Verdict:
    """`check.py --workspace W --framework F --answer A [--profile P]` in W, every path absolute.

    PASS: exit 0 and a `PASS` line; FAIL: exit 1 and `FAIL: ...` lines. Anything else (a traceback,
    another exit status, a timeout, neither or both kinds of line) is ERROR: the checker's fault.
    """
    workspace, answer, log_dir = workspace.resolve(), answer.resolve(), log_dir.resolve()
    lines: list[str] = []
    # A Q&A checker is standard library only: -S (no site-packages) holds it to that, and starts in a
    # fraction of the time, which the validation matrix's hundreds of checks feel.
    python = [sys.executable, "-S"] if task.category == "qa" else [sys.executable]
    argv = [*python, str(task.checker), "--workspace", str(workspace), "--framework", framework]
    argv += ["--answer", str(answer)] + (["--profile", profile] if profile else [])
    home = log_dir / "check-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**_minimal_env(BASE_ENV, home, home), "PYTHONDONTWRITEBYTECODE": "1"}
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
        if m is None:
            continue
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


def run_once(opts: RunOptions) -> Path:
    """One run of one agent on one task and framework; returns the record's path.

    Raises agents.CannotStart (nothing written) when the agent cannot run here.
    """
    task = opts.task
    if opts.framework not in task.frameworks:
        raise ValueError(f"task {task.id} is not valid for {opts.framework!r}; valid: {', '.join(task.frameworks)}")
    profile = task.check_profile(opts.profile)
    # Every path handed out (to the checker, the agent, the record) is absolute: they run elsewhere.
    results_dir, work_root = opts.results_dir.resolve(), opts.work_root.resolve()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    skills = "skills" if opts.skills else "noskills"
    size = f"{profile}_" if profile else ""
    run_id = f"{task.id}_{size}{opts.framework}_{opts.agent}_{skills}_{stamp}_{secrets.token_hex(2)}"
    work, run_dir = work_root / run_id, results_dir / run_id
    prompt = task.instruction(opts.framework, profile)

    # Phase 1: can the agent start at all? Nothing is created before this passes.
    need, have = task.gpus_for(profile), len(gpu_inventory())
    if need > have:
        what = f"profile {profile!r}" if profile else f"task {task.id}"
        raise agents.CannotStart(f"{what} needs {need} GPU(s); this machine has {have}")
    caller_env = dict(os.environ)
    turns = load_trajectory(Path(opts.scripted)) if opts.scripted not in ("", "gold") else []
    endpoint = ScriptedEndpoint(turns, work / "workspace", run_dir / REQUESTS_FILE) if opts.scripted else None

    # Phase 2: a fresh workspace, the agent's own HOME and TMPDIR (no user-level instruction files).
    try:
        launch = agents.make_launch(
            opts.agent, task, opts.framework, prompt, work / "workspace", run_dir, opts.model, caller_env, profile,
            endpoint=endpoint.base_url if endpoint else "",
        )  # fmt: skip
        ws = materialize(
            opts.framework,
            work / "workspace",
            mode=opts.source_mode,
            skills=opts.skills,
            prepare_dir=task.prepare_dir(opts.framework, profile),
            cache_dir=opts.cache_dir,
        )
        if opts.scripted == "gold":
            endpoint.model.turns = parse_trajectory(gold_trajectory(task, opts.framework, profile, ws.path), "gold")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        if endpoint:
            endpoint.close()
        raise
    home, tmp = work / "home", work / "tmp"
    for d in (home, tmp, run_dir):
        d.mkdir(parents=True, exist_ok=True)
    env = {**_minimal_env(BASE_ENV + opts.pass_env, home, tmp), **launch.env}

    # Phase 3: the agent, its stdout stamped line by line, GPUs sampled while it runs.
    sampler = GpuSampler(opts.gpu_source, is_agent_pid=lambda pid: False)

    def on_start(pid: int) -> None:
        sampler.is_agent_pid = make_tree_predicate(pid)
        sampler.start()

    time_limit_s = opts.time_limit_s if opts.time_limit_s is not None else task.time_limit_min * 60
    with open(run_dir / agents.STREAM_FILE, "w") as stream:

        def on_line(t: float, line: str) -> None:
            stream.write(json.dumps({"t": t, "line": line}) + "\n")
            stream.flush()

        with endpoint or contextlib.nullcontext():
            proc = run_process_tree(
                launch.argv, ws.path, env, time_limit_s, on_line, run_dir / "agent.stderr", on_start=on_start
            )
    gpu = sampler.stop()

    # Phase 4: transcript -> metrics; diff (before the checker, which may write); checker.
    agents.collect_transcript(opts.agent, home, run_dir)
    metrics, transcript, metric_error = None, None, ""
    try:
        transcript = agents.parse_transcript(opts.agent, run_dir)
        metrics = compute_metrics(transcript, proc.start, proc.end, gpu)
    except (ValueError, KeyError, TypeError, FileNotFoundError) as e:
        metric_error = f"{type(e).__name__}: {e}"
    answer = run_dir / agents.FINAL_MESSAGE_FILE
    if not answer.is_file():
        answer.write_text(transcript.final_message if transcript else "")
    diff, changed = workspace_diff(ws.path)
    (run_dir / "workspace.diff").write_text(diff)
    logs = script_logs(ws.path)  # before the checker, which may run the scripts itself
    verdict = run_checker(task, opts.framework, ws.path, answer, run_dir, profile)
    notes = []
    if logs["without_exit_time"]:
        notes.append(
            f"{len(logs['without_exit_time'])} provided-script log(s) without an exit-time line (their time is "
            f"not counted): {', '.join(logs['without_exit_time'])}"
        )
    if task.tools == "read-only" and changed:
        notes.append(f"read-only task, but the workspace changed: {', '.join(changed[:20])}")
    if proc.timed_out:
        notes.append(f"agent ran past the {time_limit_s:.0f} s limit; its process tree was killed")
    agent_error = _agent_error(opts.agent, proc, metrics, run_dir / "agent.stderr")

    record = {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "task": {
            "id": task.id,
            "category": task.category,
            "title": task.title,
            "dir": str(task.dir),
            "profile": profile,
            "gpus": need,
            "files": task.file_hashes(opts.framework),
        },
        "framework": {
            "name": opts.framework,
            "mode": ws.mode,
            "version": ws.version,
            "tree_sha256": ws.tree_sha256,
            "source": ws.source,
            "dirty_paths": ws.dirty_paths,
            "skills": ws.skills,
            "stripped": ws.stripped,
            "prepared": ws.prepared,
            "notes": ws.notes,
        },
        "agent": {
            "name": opts.agent,
            "kind": _agent_kind(opts),
            "version": (transcript.agent_version if transcript else "") or launch.cli_version or "unknown",
            "cli_version": launch.cli_version,
            "model": (transcript.model if transcript else "") or opts.model or "default",
            "argv": [a if a != prompt else "<instruction.md>" for a in launch.argv],
            "secrets_passed": launch.secret_names,
            "env_passed": sorted(env),
        },
        "metrics": dataclasses.asdict(metrics) if metrics else None,
        "metrics_error": metric_error,
        "script_logs": logs,
        "verdict": verdict_record(verdict),
        "exit": {"returncode": proc.returncode, "timed_out": proc.timed_out, "time_limit_s": time_limit_s},
        "agent_error": agent_error,
        "scripted": _scripted_record(opts.scripted, endpoint, run_dir),
        "notes": notes,
        "workspace": str(ws.path),
        "workspace_diff": diff,
        "changed_paths": changed,
        "transcript": str(run_dir / _transcript_name(opts.agent)),
        "host": host_info(),
        "started_at": _iso(proc.start),
        "ended_at": _iso(proc.end),
    }
    path = run_dir / "record.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


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


def load_records(results_dir: Path) -> list[dict]:
    records = []
    for path in sorted(results_dir.glob("*/record.json")):
        rec = json.loads(path.read_text())
        if rec.get("schema") == RECORD_SCHEMA:
            records.append(rec)
    return records


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
    )


def _status(rec: dict) -> str:
    v = rec["verdict"]
    return v.get("status") or ("PASS" if v["passed"] else "FAIL")  # records before the ERROR verdict


def report(records: list[dict]) -> str:
    """Medians over repeats, one row per task, profile, framework, source mode, version, tree hash,
    agent, model and skills (runs that differ in any of them never share a median); gold/noop apart."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        groups.setdefault(_group_key(rec), []).append(rec)
    header = ["task", "profile", "framework", "mode", "version", "tree", "agent", "model", "skills"]
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
