"""Sessions: `tests` (pytest, fast tests unless `-- -m ""`), `lint` (ruff), `throughput` (GPU benchmark).

The paper (paper/README.md): `validate`, `ate`, `ablation`, `moba` write records under results/; `figures`
rebuilds every table and figure into build/paper/ from the records present and compares them with the committed
reference paper/outputs/ (never overwritten); `reproduce` runs everything this machine can, then the same.
"""

import argparse
import contextlib
import fnmatch
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"

# The CPU build of torch lies on the CPU machines' local disk; an unpinned torch would pull a CUDA build.
TORCH_CPU = "torch==2.13.0"


@nox.session
def tests(session):
    session.install(TORCH_CPU)
    args = session.posargs or ["-m", "not slow"]
    # make test-all (posargs): TorchTitan's requirements too, for its feature golds' smoke cells (marked slow)
    session.install("-e", ".[test,torchtitan]" if session.posargs else ".[test]")
    session.run("pytest", "-q", *args, env={"OMP_NUM_THREADS": "1"})


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(venv_backend="none", default=False)  # needs a GPU: never part of a bare `nox`
def throughput(session):
    """pithtrain against TorchTitan and megatron-core on a GPU host: `nox -s throughput -- --config NAME [...]`.

    Runs in the calling environment, which must hold a CUDA torch (and TorchTitan 0.2.2 and megatron-core 0.19.2
    for the baselines; a missing one is recorded as skipped):
    a fresh venv would pull the CPU pin above. The GPU machine has no nox: there, run the script itself
    (benchmarks/gpu_run.sh does). Options and method: benchmarks/throughput.py --help, benchmarks/NOTES.md.
    """
    session.run("python3", "benchmarks/throughput.py", *(session.posargs or ["--config", "qwen3-30b-a3b-4l"]))


# ---- the paper: records under results/, every table and figure rebuilt into paper/ ----

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))  # the harness (standard library only) lists the tasks and checks the agent here
PAPER_DEPS = ("pandas", "seaborn", "matplotlib")
SMOKE_THROUGHPUT = ("benchmarks/throughput.py", "--smoke", "--out", "results/throughput-smoke")


def _newest_blind_set() -> str:
    """The newest Q&A blind set ("set21"): written after the checkers were frozen, make kick-tires validates it."""
    return max((p.name for p in REPO.glob("tasks/qa/*/blind/set*")), key=lambda name: int(name.removeprefix("set")))


def _paper_env(session, torch: bool, test_extra: bool = True) -> None:
    """pandas/seaborn/matplotlib; with `torch`, the CPU torch pin and pithtrain, with its test extra unless
    `test_extra` is False (operate-02's checker loads the Hugging Face export with transformers; the kick-tires
    subset runs no such checker). Each install says what it fetches and how long it took, and shows pip's
    progress (a fresh clone spends minutes here)."""
    steps = []
    if torch:
        steps.append((TORCH_CPU, "the CPU build of torch, about 200 MB on a fresh clone"))
        if test_extra:
            steps.append(("-e .[test]", "pithtrain and its test extra (transformers, tensorboard, ...)"))
        else:
            steps.append(("-e .", "pithtrain (triton, numpy, safetensors, tokenizers)"))
    steps.append((" ".join(PAPER_DEPS), "the figures' packages"))
    for n, (what, why) in enumerate(steps, 1):
        t0 = time.monotonic()
        session.log(f"[set-up {n}/{len(steps)}] pip install {what}: {why} ...")
        session.install(*what.split(), silent=False)
        session.log(f"[set-up {n}/{len(steps)}] done in {time.monotonic() - t0:.0f} s")


def _tasks(globs: list[str]) -> dict:
    from ate_bench.tasks import load_tasks

    found = load_tasks(REPO / "tasks")
    return {i: t for i, t in found.items() if any(fnmatch.fnmatchcase(i, g) for g in globs)}


def _agent_args(session, default_tasks: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"nox -s {session.name} --")
    p.add_argument("--agent", required=True, help="claude-code, codex or mini-swe-agent")
    p.add_argument("--model", default="", help="passed to the agent (mini-swe-agent needs provider/name)")
    p.add_argument("--tasks", nargs="+", default=default_tasks, metavar="GLOB")
    p.add_argument("--frameworks", nargs="+", default=["pithtrain", "torchtitan", "megatron-lm"])
    p.add_argument(
        "--profile", default="", help="operate/feature tasks: smoke, gpu1 or paper (default: the task's first)"
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--scripted",
        action="store_true",
        help="pipeline check, offline and keyless: the real CLI against a scripted model replaying golds "
        f"({', '.join(t for t, _ in SCRIPTED_RUNS)} on pithtrain, smoke); records and outputs say so",
    )
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):  # argparse's usage and error, said once below as one line
            return p.parse_args(session.posargs)
    except SystemExit as e:
        if e.code == 0:
            session.skip("help printed")
        lines = err.getvalue().strip().splitlines()
        why = " ".join(x.split(": error: ", 1)[1] for x in lines if ": error: " in x)
        usage = " ".join(x.strip() for x in lines if ": error: " not in x)
        session.error(f"{why}. {usage} (for example: nox -s {session.name} -- --agent claude-code)")


def _cannot_start(agent: str, model: str = "", tasks: dict | None = None, scripted: bool = False) -> str:
    """Why `agent` cannot start here (its CLI or key is missing; with `scripted`, its CLI), or "" when it can."""
    from ate_bench import agents

    tasks = tasks or _tasks(["*"])
    if not tasks:
        return "no task in tasks/"
    task = next(iter(tasks.values()))
    endpoint = "http://127.0.0.1:0" if scripted else ""  # a scripted endpoint needs no key
    try:
        agents.make_launch(agent, task, task.frameworks[0], "", REPO, REPO, model, dict(os.environ), endpoint=endpoint)
    except agents.CannotStart as e:
        return str(e)
    return ""


def _refuse_without_agent(session, args, tasks: dict) -> None:
    """Stop before any workspace is made when the agent cannot start here (CLI or key missing)."""
    if not tasks:
        session.error(f"no task in tasks/ matches {' '.join(args.tasks)}")
    why = _cannot_start(args.agent, args.model, tasks, args.scripted)
    if why:
        session.error(f"refusing to run: {why}. Nothing was run; no record was written.")


def _run_agents(session, args, tasks: dict, frameworks: list[str], skills_arms: tuple[bool, ...]) -> None:
    for tid, task in tasks.items():
        for fw in (f for f in task.frameworks if f in frameworks):
            for skills in skills_arms:
                cmd = ["python", "-m", "ate_bench", "run", "--task", tid, "--framework", fw, "--agent", args.agent]
                cmd += ["--repeat", str(args.repeat)] + (["--model", args.model] if args.model else [])
                cmd += ["--profile", args.profile] if args.profile and task.profiles else []
                cmd += [] if skills else ["--no-skills"]
                session.run(*cmd, success_codes=[0, 1, 3])  # FAIL and checker ERROR are results, not crashes


@nox.session(default=False)
def validate(session):
    """Checker validation matrix: `nox -s validate [-- validate options]` (default: every task, smoke profile)."""
    _paper_env(session, torch=True)
    session.run("python", "-m", "ate_bench", "validate", *(session.posargs or ["--profiles", "smoke"]))


# The pipeline check (`--scripted`): one task per category on pithtrain with the trajectory made from its gold;
# the Q&A task in both skills arms (the ablation's pair), the feature task MoBA (the case study's transcript).
SCRIPTED_RUNS = (("qa-01", (True, False)), ("operate-02", (True,)), ("feature-01", (True,)))


def _scripted_session(session, args) -> None:
    tasks = _tasks([t for t, _ in SCRIPTED_RUNS])
    _refuse_without_agent(session, args, tasks)
    _paper_env(session, torch=True)  # the operate and feature checkers, and the agent's training runs
    for tid, arms in SCRIPTED_RUNS:
        for skills in arms:
            cmd = ["python", "-m", "ate_bench", "run", "--task", tid, "--framework", "pithtrain"]
            cmd += ["--agent", args.agent, "--scripted"] + (["--model", args.model] if args.model else [])
            cmd += (["--profile", "smoke"] if tasks[tid].profiles else []) + ([] if skills else ["--no-skills"])
            session.run(*cmd, success_codes=[0, 1, 3])
    session.run("python", "-m", "paper.rebuild")


def _agent_session(session, default_tasks: list[str], only_moba: bool, pithtrain_only: bool, arms: tuple) -> None:
    """Parse `-- --agent ...`, refuse before anything is made if the agent cannot start, run, rebuild paper/."""
    args = _agent_args(session, default_tasks)
    if args.scripted:
        return _scripted_session(session, args)
    tasks = {i: t for i, t in _tasks(args.tasks).items() if not only_moba or "moba" in t.dir.name.lower()}
    _refuse_without_agent(session, args, tasks)
    _paper_env(session, torch=False)
    _run_agents(session, args, tasks, ["pithtrain"] if pithtrain_only else args.frameworks, arms)
    session.run("python", "-m", "paper.rebuild")


@nox.session(default=False)
def ate(session):
    """ATE-Bench with a real agent: `nox -s ate -- --agent claude-code [--tasks GLOB ...] [--repeat 3]`.

    `--scripted`: the pipeline check, offline and keyless (the CLI from `make agents`, a scripted model).
    """
    _agent_session(session, ["*"], only_moba=False, pithtrain_only=False, arms=(True,))


@nox.session(default=False)
def ablation(session):
    """Skills ablation on pithtrain, both arms: `nox -s ablation -- --agent claude-code [--tasks ...]`.

    Default tasks: the operate and feature tasks (what the skills are for: running, profiling, extending).
    """
    _agent_session(session, ["operate-*", "feature-*"], only_moba=False, pithtrain_only=True, arms=(True, False))


@nox.session(default=False)
def moba(session):
    """The MoBA case study: the MoBA feature task on every framework, then its tables and figure."""
    _agent_session(session, ["feature-*"], only_moba=True, pithtrain_only=False, arms=(True,))


@nox.session(default=False)
def figures(session):
    """Rebuild every table and figure into build/paper/ from the records present under results/ (runs nothing),
    then compare them with the committed reference paper/outputs/ (`-- --out paper` refreshes the reference)."""
    _paper_env(session, torch=False)
    session.run("python", "-m", "paper.rebuild", *session.posargs)
    if "--out" not in session.posargs:
        session.run("python", "-m", "paper.compare", "--write", "build/paper/compare.md")


def _gpu_count() -> int:
    smi = shutil.which("nvidia-smi")
    done = subprocess.run([smi, "-L"], capture_output=True, text=True) if smi else None
    return len(done.stdout.splitlines()) if done and done.returncode == 0 else 0


def _gpu_configs() -> list[tuple[str, int, list[str]]]:
    """The local throughput configs whose meshes fit this host's GPUs, each with the meshes that fit."""
    import tomllib

    n, out = _gpu_count(), []
    for name, cfg in tomllib.loads((REPO / "benchmarks" / "configs.toml").read_text()).items():
        fits = sorted({m["gpus"] for m in cfg.get("meshes", []) if m["gpus"] <= n and m.get("nodes", 1) == 1})
        if cfg.get("where") == "local" and fits:
            gpus = ",".join(map(str, fits))
            out.append((name, fits[-1], ["benchmarks/throughput.py", "--config", name, "--gpus", gpus]))
    return out


def _rebuild_and_compare(session, label: str) -> list[str]:
    """Every output into build/paper/ (the committed paper/ is the reference and stays as it is), then the table
    of what moved against it. Returns the steps that failed."""
    t0, failed = time.monotonic(), []
    session.log(f"{label} figures: python -m paper.rebuild (into build/paper/)")
    try:
        session.run("python", "-m", "paper.rebuild")
    except nox.command.CommandFailed:
        failed.append("figures")
    session.log(f"{label} figures: {time.monotonic() - t0:.0f} s; against the reference paper/outputs/:")
    session.run("python", "-m", "paper.compare", "--write", "build/paper/compare.md")
    return failed


@nox.session(default=False)
def reproduce(session):
    """Everything this machine can run, then every output: `nox -s reproduce [-- --kick-tires]`.

    No GPU, no agent key (CI): the validation matrix on the smoke profile, code size, the agent-free costs,
    the throughput smoke run, then figures. With GPUs: the gpu1 profile too, and the local throughput configs
    that fit (run by the host's python3, which must hold a CUDA torch). With an agent key: the ATE runs.
    --kick-tires: a labelled subset under 10 minutes (Q&A validation on pithtrain, its keys' cases and the newest
    blind set; costs on pithtrain only).
    """
    kick = "--kick-tires" in session.posargs
    label = "[kick-tires]" if kick else "[reproduce]"
    t_setup = time.monotonic()
    _paper_env(session, torch=True, test_extra=not kick)
    gpu = _gpu_count() > 0
    profiles = ["smoke", "gpu1"] if gpu else ["smoke"]
    only_pith = ["--frameworks", "pithtrain"] if kick else []
    # kick-tires' Q&A cases: the keys' own (gold, noop, the written wrong answers, the generated ones) and the newest
    # blind set; all 21 sets made it 19 minutes on 2 cores. "[!s]*" is every case but a blind set's "setN/..." and the
    # generated "shifted" and "stripped", named back.
    newest = _newest_blind_set() if kick else ""
    kick_cases = ["[!s]*", "shifted", "stripped", f"{newest}/*"]
    steps = [
        ("6: validation matrix", ["python", "-m", "ate_bench", "validate", "--profiles", *profiles]
         + (["--tasks", "qa-*", *only_pith, "--cases", *kick_cases] if kick else [])),
        ("1: code size", ["python", "paper/measure_code_size.py"]),
        ("6: agent-free costs", ["python", "-m", "ate_bench", "cost", *only_pith]),
        ("2: throughput smoke (CPU, tiny model)", ["python", *SMOKE_THROUGHPUT]),
    ]  # fmt: skip
    if kick:
        session.log(
            f"{label} a subset: Q&A validation on pithtrain (the keys' cases and blind {newest}), its costs,"
            " code size, throughput smoke"
        )
    not_run = []
    if gpu and not kick:
        # The throughput runs need the host's CUDA torch, not this session's CPU pin: run outside the venv.
        steps += [(f"2: throughput {name} on {gpus} GPU(s)", ["python3", *cmd]) for name, gpus, cmd in _gpu_configs()]
    elif not gpu:
        not_run.append("2: throughput on GPUs (no GPU here; `nox -s throughput` on a GPU host)")
    why_no_agent = _cannot_start("claude-code")
    if why_no_agent:
        not_run.append(f"3-5: ATE agent runs ({why_no_agent})")
    done, t_all = [], time.monotonic()
    for name, cmd in steps:
        t0 = time.monotonic()
        session.log(f"{label} result {name}: {' '.join(cmd)}")
        try:
            session.run(*cmd, env={"OMP_NUM_THREADS": "1"}, external=cmd[0] == "python3")
            ok = True
        except nox.command.CommandFailed:
            ok = False
        done.append({"result": name, "command": " ".join(cmd), "seconds": round(time.monotonic() - t0), "ok": ok})
        session.log(f"{label} result {name}: {'done' if ok else 'FAILED'} in {done[-1]['seconds']} s")
    if not why_no_agent and not kick:
        t0 = time.monotonic()
        agent = argparse.Namespace(agent="claude-code", model="", profile="", repeat=3)
        session.log(f"{label} results 3-5: ATE-Bench with claude-code, 3 repeats, every task and framework")
        _run_agents(session, agent, _tasks(["*"]), ["pithtrain", "torchtitan", "megatron-lm"], (True,))
        _run_agents(session, agent, _tasks(["operate-*", "feature-*"]), ["pithtrain"], (False,))
        done.append({"result": "3-5: ATE-Bench runs", "command": "nox -s ate/ablation (claude-code, 3 repeats)",
                     "seconds": round(time.monotonic() - t0), "ok": True})  # fmt: skip
    # What ran, how long, what did not and why: paper/README.md shows the newest of these.
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    from ate_bench.source_stamp import tree_commit

    head, _ = tree_commit(REPO)
    log = {"date": stamp, "commit": head, "kick_tires": kick, "gpus": _gpu_count(), "not_run": not_run}
    log["steps"] = [{"result": "set-up: the session's environment", "command": "pip install ...", "ok": True,
                     "seconds": round(t_all - t_setup)}, *done]  # fmt: skip
    (REPO / "results" / "reproduce").mkdir(parents=True, exist_ok=True)
    (REPO / "results" / "reproduce" / f"{stamp}.json").write_text(json.dumps(log, indent=2) + "\n")
    failed = [d["result"] for d in done if not d["ok"]]
    failed += _rebuild_and_compare(session, label)
    for n in not_run:
        session.log(f"{label} not run: {n}")
    session.log(
        f"{label} this session {time.monotonic() - t_setup:.0f} s (set-up {t_all - t_setup:.0f} s); outputs in "
        "build/paper/ (index build/paper/README.md), compared with the reference in build/paper/compare.md"
    )
    if failed:
        session.error(f"{label} failed: {', '.join(failed)} (outputs still rebuilt from the records present)")
