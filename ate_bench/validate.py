"""`python -m ate_bench validate`: prove every checker against right and wrong answers.

For each task x framework x profile the machine can run, the cases are: `gold` (must PASS), `noop` (an
empty final message and an untouched workspace: must FAIL), every `wrong/<framework>/*.md` (a final
message, verbatim) and `wrong/<framework>/*.sh` (run like the gold), and the generated ones: for Q&A
`shifted` (the gold's every cited line + 40), `stripped` (the gold without citations) and
`other-task` (the next Q&A task's gold for the same framework); for feature tasks `other-task`. Each
must FAIL. ERROR (the checker's own failure) is never as expected.

Q&A tasks also check their blind answer sets, `blind/<set>/<framework>/*.md` (tasks/qa/README.md): an answer
its writer labelled `correct-*` must PASS and `wrong-*` must FAIL, unless `<answer>.adjudicated` says
otherwise (its first word, `correct:` or `wrong:`, then why); and every wrong one again with the first correct
answer's slot citations added to its own slots and to its explanation (`+cited`), which must FAIL too. The
record's `summary.blind` holds the rates per set and framework. pithtrain's blind answers cite lines of the
tree their writers read (tasks/qa/blind_sets.toml), so they are checked against a workspace of that commit's
tree, not HEAD's (a commit missing from the history makes them "not run", with the reason). A profile that
needs more GPUs than this machine has, or a `[unrunnable]` cell of task.toml, is "not run" with the reason:
never passed.

A near miss may say what its FAIL must be for: a header line `# FAILs for: <regex>`; a feature task's near miss
that names none must FAIL at a check of the feature (FEATURE_MISTAKE). A FAIL whose reasons none match is ERROR:
it failed, but not on its mistake (a wrong case that crashed, ran out of memory or missed a provided step proves
nothing about the checker).

Read-only tasks share one workspace per framework per call (it is checked unchanged, by tree hash,
after every case); edit tasks get a fresh workspace per case. One record per call (schema below).
"""

import argparse
import fnmatch
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from ate_bench import agents, sandbox
from ate_bench.gpu import gpu_inventory
from ate_bench.procs import run_process_tree
from ate_bench.runner import BASE_ENV, NO_SANDBOX, _minimal_env, host_info, run_checker, script_logs, short_tmpdir
from ate_bench.tasks import TaskError, TaskSpec, load_tasks, task_ids
from ate_bench.workspace import REPO_ROOT, Workspace, materialize, repo_state, resolve_mode, tree_sha256

SCHEMA = "ate-bench-validation-1"
# The citation form of notes/qa_format.md, used to shift and strip a gold answer's citations.
CITATION = re.compile(r"(?P<path>[A-Za-z0-9_./-]+\.[A-Za-z0-9_]+):(?P<start>\d+)(?:-(?P<end>\d+))?")
SHIFT_LINES = 40
NOT_RUN = "not run"


@dataclass
class Case:
    name: str
    kind: str
    """gold | noop | wrong-md | wrong-sh | generated | blind-correct | blind-wrong | blind-cited"""
    expected: str
    message: str | None = None
    """The final message as given (noop, wrong .md); None for a script or a derived case."""
    script: Path | None = None
    """Run in the workspace like the gold; its stdout is the final message."""
    derive: str = ""
    """`shifted` or `stripped`: made from the gold's final message once the gold has run."""
    skip: str = ""
    """Why the case cannot run here (the cell is recorded "not run")."""
    tree: str = ""
    """pithtrain: the commit whose tree the answer cites (a blind set's); "" for HEAD."""
    checker_args: tuple[str, ...] = ()
    """Added to check.py's arguments: a blind set's `--written-at-freeze N`."""
    fails_for: str = ""
    """A near miss's `# FAILs for: <regex>`: one of its FAIL's reasons must match, else the cell is ERROR."""


@dataclass
class Cell:
    task: str
    framework: str
    profile: str
    case: str
    kind: str
    expected: str
    verdict: str
    """PASS, FAIL, ERROR or "not run"."""
    reasons: list[str]
    seconds: float

    @property
    def as_expected(self) -> bool:
        return self.verdict == self.expected

    @property
    def unexpected(self) -> bool:
        return self.verdict != NOT_RUN and not self.as_expected


def shifted(message: str) -> str:
    def one(m: re.Match) -> str:
        end = f"-{int(m['end']) + SHIFT_LINES}" if m["end"] else ""
        return f"{m['path']}:{int(m['start']) + SHIFT_LINES}{end}"

    return CITATION.sub(one, message)


def stripped(message: str) -> str:
    return re.sub(r"`\s*`", "", CITATION.sub("", message))


_SLOT_LINE = re.compile(
    r"^[\s>*_`-]*(?:\d+[.)]\s+[*_`]*)?(?P<name>[a-z][a-z0-9]*(?:-[a-z0-9]+)*)[*_`]*\s*:(?P<value>.*)$"
)
"""A slot line as tasks/qa/qa_check.py reads it."""


def _final_block(message: str) -> tuple[int, int] | None:
    """(index of the last `<final-answer>` line, index of the `</final-answer>` after it) in message's lines."""
    lines = message.splitlines()
    for i in reversed([i for i, line in enumerate(lines) if line.strip() == "<final-answer>"]):
        for j in range(i + 1, len(lines)):
            if lines[j].strip() == "</final-answer>":
                return i, j
    return None


def with_right_citations(wrong: str, correct: str) -> str:
    """`wrong` with each of `correct`'s slot citations appended to the same slot's line of `wrong` (the last
    one, as the checker reads it) and all of them to its explanation: a wrong claim that cites the right lines."""
    span = _final_block(correct)
    right: dict[str, list[str]] = {}
    for line in correct.splitlines()[span[0] + 1 : span[1]] if span else []:
        m = _SLOT_LINE.match(line)
        if m and CITATION.search(m["value"]):
            right[m["name"]] = [c[0] for c in CITATION.finditer(m["value"])]
    lines = wrong.splitlines()
    span = _final_block(wrong)
    if span is None or not right:
        return wrong
    last = {}
    for i in range(span[0] + 1, span[1]):
        m = _SLOT_LINE.match(lines[i])
        if m and m["name"] in right:
            last[m["name"]] = i
    for name, i in last.items():
        lines[i] = f"{lines[i].rstrip()}, {', '.join(right[name])}"
    every = [c for cites in right.values() for c in cites]
    lines.insert(span[0] + 1, f"The lines that show it: {', '.join(every)}.")
    return "\n".join(lines) + "\n"


def blind_tree(sets: dict, set_name: str) -> tuple[str, str]:
    """(the pithtrain commit a set's writers read, from tasks/qa/blind_sets.toml's tables `sets`, or "";
    why it cannot be used, or ""). Its answers are checked against that tree, not HEAD's: they cite its lines."""
    commit = sets.get(set_name, {}).get("pithtrain_commit")
    if not isinstance(commit, str):
        return "", f"tasks/qa/blind_sets.toml gives no pithtrain_commit for {set_name} (the commit its writers read)"
    argv = ["git", "cat-file", "-e", f"{commit}^{{commit}}"]
    if subprocess.run(argv, cwd=REPO_ROOT, capture_output=True).returncode != 0:
        return "", f"commit {commit[:12]}, the tree {set_name}'s writers read, is not in this repository's history"
    return commit, ""


def blind_cases(task: TaskSpec, framework: str) -> list[Case]:
    """The task's blind answers for `framework`, every set (see the module docstring). A set's `freeze` in
    tasks/qa/blind_sets.toml (the freeze whose instruction its writers read) reaches check.py as
    `--written-at-freeze N`: a slot the instruction gained after N is not asked of its answers."""
    sets_file, unreadable = task.dir.parent / "blind_sets.toml", ""
    try:
        sets = tomllib.loads(sets_file.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        sets, unreadable = {}, f"cannot read {sets_file}: {e}"
    cases = []
    for set_dir in sorted(p for p in (task.dir / "blind").glob("*") if (p / framework).is_dir()):
        tree, moved = blind_tree(sets, set_dir.name) if framework == "pithtrain" else ("", "")
        moved = unreadable or moved
        freeze = sets.get(set_dir.name, {}).get("freeze")
        args = ("--written-at-freeze", str(freeze)) if isinstance(freeze, int) else ()
        answers = sorted((set_dir / framework).glob("*.md"))
        labelled = []
        for path in answers:
            label, note = ("correct" if path.name.startswith("correct-") else "wrong"), ""
            adjudicated = path.with_name(path.name + ".adjudicated")
            if adjudicated.is_file():
                label = adjudicated.read_text().split(":", 1)[0].strip()
                note = f" [adjudicated {label}]"
            labelled.append((path, label, note))
        first_correct = next((p.read_text() for p, label, _ in labelled if label == "correct"), None)
        for path, label, note in labelled:
            name = f"{set_dir.name}/{path.name}{note}"
            text = path.read_text()
            if label == "correct":
                cases.append(Case(name, "blind-correct", "PASS", text, skip=moved, tree=tree, checker_args=args))
                continue
            cases.append(Case(name, "blind-wrong", "FAIL", text, skip=moved, tree=tree, checker_args=args))
            if first_correct is not None:
                cited = f"{set_dir.name}/{path.stem}+cited.md"
                variant = with_right_citations(text, first_correct)
                cases.append(Case(cited, "blind-cited", "FAIL", variant, skip=moved, tree=tree, checker_args=args))
    return cases


def blind_rates(cells: list["Cell"]) -> dict:
    """{set: {framework: {correct_pass, correct, wrong_fail, wrong, cited_fail, cited}}} over the blind cells run."""
    rates: dict = {}
    for c in cells:
        if not c.kind.startswith("blind-") or c.verdict == NOT_RUN:
            continue
        row = rates.setdefault(c.case.split("/", 1)[0], {}).setdefault(
            c.framework, dict.fromkeys(("correct_pass", "correct", "wrong_fail", "wrong", "cited_fail", "cited"), 0)
        )
        kind = c.kind.removeprefix("blind-")
        row[kind] += 1
        row[f"{kind}_pass" if kind == "correct" else f"{kind}_fail"] += c.as_expected
    return rates


def _other_task(task: TaskSpec, framework: str, all_tasks: dict[str, TaskSpec]) -> TaskSpec | None:
    """The next task of the same category (by id, wrapping) that lists `framework`."""
    peers = sorted(t.id for t in all_tasks.values() if t.category == task.category and framework in t.frameworks)
    later = [i for i in peers if i > task.id] + [i for i in peers if i < task.id]
    return all_tasks[later[0]] if later else None


_NEAR_MISS_ONLY = re.compile(r"^# Near miss only on (?P<profiles>[\w, ]+): (?P<why>.+)$", re.MULTILINE)
_FAILS_FOR = re.compile(r"^# FAILs for: (?P<pattern>.+)$", re.MULTILINE)
FEATURE_MISTAKE = r"^(op|aux|seam)\b|^branch \(|^liveness: with the feature"
"""A feature checker's reasons that judge the feature: the op or aux function against the reference, the model's calls
of them, the branch run's, the switch. Not "training: ...", "branch: ..." or "liveness: <script> exited ...": a run
that crashed or ran out of memory, which says nothing of the mistake."""


def fails_for(script: Path) -> str:
    """The regex a near miss's FAIL must match (its `# FAILs for:` line), or ""."""
    found = _FAILS_FOR.search(script.read_text())
    return found["pattern"].strip() if found else ""


def near_miss_elsewhere(script: Path, profile: str) -> str:
    """Why a wrong .sh is not run on `profile` ("" if it is): its header says it is a near miss only on other
    profiles, whose config its mistake is not right for (a default block size that splits gpu1's sequence into the
    asked 8 blocks is a right configuration there)."""
    only = _NEAR_MISS_ONLY.search(script.read_text())
    if only and profile and profile not in re.split(r"[,\s]+", only["profiles"]):
        return f"a near miss only on {only['profiles']}: {only['why']}"
    return ""


def cases_for(task: TaskSpec, framework: str, profile: str, all_tasks: dict[str, TaskSpec]) -> list[Case]:
    cases = [Case("gold", "gold", "PASS", script=task.gold_script(framework)), Case("noop", "noop", "FAIL", message="")]
    for path in task.wrong_cases(framework):
        if path.suffix == ".md":
            cases.append(Case(path.name, "wrong-md", "FAIL", message=path.read_text()))
        else:
            skip = near_miss_elsewhere(path, profile)
            why = fails_for(path) or (FEATURE_MISTAKE if task.category == "feature" else "")
            cases.append(Case(path.name, "wrong-sh", "FAIL", script=path, skip=skip, fails_for=why))
    if task.category == "qa":
        cases += [Case(name, "generated", "FAIL", derive=name) for name in ("shifted", "stripped")]
        cases += blind_cases(task, framework)
    if task.category in ("qa", "feature"):
        other = _other_task(task, framework, all_tasks)
        if other is None:
            why = f"no other {task.category} task lists {framework}"
            cases.append(Case("other-task", "generated", "FAIL", skip=why))
        elif profile and other.unrunnable.get(f"{framework}/{profile}"):
            why = f"{other.id}'s gold cannot run on {framework}/{profile}: {other.unrunnable[f'{framework}/{profile}']}"
            cases.append(Case("other-task", "generated", "FAIL", skip=why))
        else:
            cases.append(Case("other-task", "generated", "FAIL", script=other.gold_script(framework)))
    unrunnable = task.unrunnable.get(f"{framework}/{profile}", "") if profile else ""
    # The framework cannot run the task here: the gold, what derives from it, and the near misses, which break it
    # or run the same trainer, are not run; the noop and wrong answers (messages) still prove the checker.
    if unrunnable:
        for c in cases:
            if c.kind in ("gold", "generated", "wrong-sh") and not c.skip:
                c.skip = f"unrunnable in task.toml: {unrunnable}"
    return cases


class _Workspaces:
    """Materializes workspaces under one scratch root; shares one per framework for read-only tasks."""

    def __init__(self, root: Path, source: str, cache_dir: Path):
        self.root, self.source, self.cache_dir = root, source, cache_dir
        self.modes: dict[str, str] = {}
        self.info: dict[str, dict] = {}
        self.shared: dict[str, tuple[Workspace, str]] = {}
        self.stat_cache: dict[str, dict] = {}  # per shared workspace: tree_sha256's stat cache
        self.n = 0

    def fresh(self, task: TaskSpec, framework: str, profile: str, tree: str = "") -> Workspace:
        if framework not in self.modes:
            self.modes[framework] = resolve_mode(framework, self.source, self.cache_dir)
        self.n += 1
        mode = self.modes[framework] if framework != "pithtrain" else "auto"
        ws = materialize(
            framework,
            self.root / f"ws-{self.n}-{framework}",
            mode=mode,
            prepare_dir=task.prepare_dir(framework, profile),
            cache_dir=self.cache_dir,
            at_commit=tree,
        )
        if tree:
            return ws
        self.info.setdefault(framework, {"mode": ws.mode, "version": ws.version, "tree_sha256": ws.tree_sha256})
        return ws

    def get(self, task: TaskSpec, framework: str, profile: str, tree: str = "") -> tuple[Workspace, str | None]:
        """(workspace, its tree hash to hold it to), or (workspace, None) for a one-case workspace. `tree`: a
        pithtrain commit other than HEAD (a blind set's), kept apart from HEAD's shared workspace."""
        key = f"{framework}@{tree}" if tree else framework
        if task.tools == "read-only" and not task.prepare_dir(framework, profile).is_dir():
            if key not in self.shared:
                ws = self.fresh(task, framework, profile, tree)
                self.stat_cache[key] = {}
                self.shared[key] = (ws, tree_sha256(ws.path, self.stat_cache[key]))
            return self.shared[key]
        return self.fresh(task, framework, profile, tree), None

    def done(self, ws: Workspace, held: str | None) -> str:
        """After a case: a one-case workspace goes; a shared one must be unchanged (else it is remade)."""
        if held is None:
            shutil.rmtree(ws.path, ignore_errors=True)
            return ""
        key = next(k for k, (shared, _) in self.shared.items() if shared is ws)
        if tree_sha256(ws.path, self.stat_cache[key]) == held:
            return ""
        del self.shared[key]
        shutil.rmtree(ws.path, ignore_errors=True)
        return "the case changed the read-only workspace (its tree hash differs); the next case gets a fresh one"


def _run_script(script: Path, profile: str, ws: Path, log_dir: Path, time_limit_s: float) -> tuple[str, int, str]:
    """(stdout, exit status, stderr tail) of a gold or wrong script run in the workspace."""
    launch = agents.script_launch(script, profile)
    home = log_dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    with short_tmpdir("ate-script-") as tmp:
        env = {**_minimal_env(BASE_ENV, home, tmp), **launch.env}
        done = run_process_tree(
            launch.argv, ws, env, time_limit_s, lambda t, line: lines.append(line), log_dir / "script.stderr"
        )
    tail = (log_dir / "script.stderr").read_text(errors="replace").strip()[-1500:]
    if done.timed_out:
        tail = f"ran past {time_limit_s:.0f} s; killed. {tail}"
    return "\n".join(lines) + ("\n" if lines else ""), (124 if done.timed_out else done.returncode), tail


# The feature and operate tasks' provided scripts and golds run TorchTitan with the harness's Python (the workspace
# holds its source only; operate-01's gold builds a venv of its own, but its checker and the other golds do not), and
# the operate checkers recompute with the pinned torchtitan installed there.
TRAINER_REQUIREMENTS = {"torchtitan": ("torchtitan", "tyro", "torchdata", "datasets")}


def requirements_missing(framework: str) -> str:
    """Why this Python cannot run `framework`'s trainer ("" if it can)."""
    missing = [m for m in TRAINER_REQUIREMENTS.get(framework, ()) if importlib.util.find_spec(m) is None]
    if not missing:
        return ""
    install = f"pip install -e '.[{framework}]'"
    return f"{framework}'s requirements are not installed in this Python ({', '.join(missing)}): {install}"


def row_not_run(task: TaskSpec, framework: str, profile: str, gpus_here: int) -> str:
    """ "" or why none of the row's cases can run on this machine (GPUs, or the framework's requirements)."""
    need = task.gpus_for(profile)
    why = f"profile {profile} needs {need} GPU(s); this machine has {gpus_here}" if need > gpus_here else ""
    return why or (requirements_missing(framework) if task.category != "qa" else "")


@dataclass
class _GoldSoFar:
    """What a row's derived cases (shifted, stripped) need from its gold: its answer, or why there is none."""

    message: str | None = None
    problem: str = "the gold has not run"


def decide_case(
    task: TaskSpec,
    framework: str,
    profile: str,
    case: Case,
    log_dir: Path,
    spaces: _Workspaces,
    gold: _GoldSoFar,
    isolated: bool,
) -> tuple[str, list[str]]:
    """One case's verdict and reasons: its answer (given, made by its script, or derived from the gold's), then the
    checker on it. A gold or near-miss script that fails is ERROR, as is a FAIL that is not for the case's mistake."""
    if case.skip:
        return NOT_RUN, [case.skip]
    if case.derive and gold.message is None:
        return NOT_RUN, [f"made from the gold's answer, but {gold.problem}"]
    log_dir.mkdir(parents=True)
    ws, held = spaces.get(task, framework, profile, case.tree)
    notes: list[str] = []
    message = case.message
    if case.script is not None:
        message, code, tail = _run_script(case.script, profile, ws.path, log_dir, task.time_limit_min * 60)
        if code != 0 and case.kind == "gold":
            gold.problem = f"the gold script exited {code}"
            spaces.done(ws, held)
            return "ERROR", [f"gold script exited {code}: {tail or '(no stderr)'}"]
        if code != 0 and case.kind == "wrong-sh":  # a near miss that did not build: its FAIL could be the crash's
            spaces.done(ws, held)
            return "ERROR", [f"the near miss's script exited {code}: {tail or '(no stderr)'}"]
        if code != 0:
            notes.append(f"script exited {code}: {tail.splitlines()[-1] if tail else '(no stderr)'}")
    elif case.derive == "shifted":
        message = shifted(gold.message)
    elif case.derive == "stripped":
        message = stripped(gold.message)
    if case.kind == "gold":
        gold.message = message
    answer = log_dir / "answer.md"
    answer.write_text(message)
    unclosed = script_logs(ws.path)["without_exit_time"]
    if unclosed:  # the provided scripts' trap must close every log (active GPU time is read from them)
        notes.append(f"{len(unclosed)} provided-script log(s) without an exit-time line: {', '.join(unclosed)}")
    verdict = run_checker(
        task, framework, ws.path, answer, log_dir, profile, isolated, case.checker_args, spaces.cache_dir
    )
    changed = spaces.done(ws, held)
    if changed:
        return "ERROR", [changed, *verdict.reasons, *notes]
    if verdict.status == "FAIL" and case.fails_for and not any(re.search(case.fails_for, r) for r in verdict.reasons):
        why = f"FAILed, but not for its mistake (no reason matches its '# FAILs for: {case.fails_for}')"
        return "ERROR", [why, *verdict.reasons, *notes]
    return verdict.status, verdict.reasons + notes


def validate_row(
    task: TaskSpec,
    framework: str,
    profile: str,
    all_tasks: dict[str, TaskSpec],
    spaces: _Workspaces,
    gpus_here: int,
    show: Callable[[Cell], None] = lambda cell: None,
    isolated: bool = True,
    case_globs: tuple[str, ...] = ("*",),
) -> list[Cell]:
    """The row's cells, each passed to `show` as it is decided (progress); checkers in the sandbox
    unless not `isolated`; only the cases whose names match `case_globs`."""
    cases = [
        c for c in cases_for(task, framework, profile, all_tasks) if any(fnmatch.fnmatch(c.name, g) for g in case_globs)
    ]
    why = row_not_run(task, framework, profile, gpus_here)
    cells: list[Cell] = []
    gold = _GoldSoFar()
    for i, case in enumerate(cases):
        t0 = time.monotonic()
        if why:
            verdict, reasons = NOT_RUN, [why]
        else:
            log_dir = spaces.root / "logs" / f"{task.id}-{framework}-{profile or 'none'}-{i}"
            verdict, reasons = decide_case(task, framework, profile, case, log_dir, spaces, gold, isolated)
        seconds = 0.0 if why else round(time.monotonic() - t0, 2)
        cells.append(Cell(task.id, framework, profile, case.name, case.kind, case.expected, verdict, reasons, seconds))
        show(cells[-1])
    return cells


def _mark(c: Cell) -> str:
    """`case:VERDICT`, `!!` when it is not as expected: one entry of the printed matrix."""
    return f"{c.case}:{'not-run' if c.verdict == NOT_RUN else c.verdict}" + ("!!" if c.unexpected else "")


def _show(c: Cell) -> None:
    print(f" {_mark(c)}", end="", flush=True)


def _row_tail(cells: list[Cell]) -> str:
    ran = [c for c in cells if c.verdict != NOT_RUN]
    ok = sum(c.as_expected for c in ran)
    secs = sum(c.seconds for c in cells)
    tail = f"{ok}/{len(ran)} as expected" + (f", {len(cells) - len(ran)} not run" if len(ran) < len(cells) else "")
    return f" [{tail}, {secs:.1f} s]"


def select_tasks(tasks_dir: Path, globs: list[str]) -> tuple[list[TaskSpec], dict[str, TaskSpec]]:
    """(the tasks whose id matches a glob, every task of their categories): only those are loaded, so a
    half-written task of another category does not stop this call."""
    ids = task_ids(tasks_dir)
    wanted = [i for i in ids if any(fnmatch.fnmatchcase(i, g) for g in globs)]
    if not wanted:
        raise TaskError(f"no task matches {' '.join(globs)} in {tasks_dir}; known: {', '.join(ids) or '(none)'}")
    categories = {i.split("-")[0] for i in wanted}
    peers = load_tasks(tasks_dir, only=lambda i: i.split("-")[0] in categories)
    return [peers[i] for i in wanted if i in peers], peers


def provenance(command: list[str]) -> dict:
    commit, dirty = repo_state()
    return {
        "commit": commit,
        "dirty_paths": dirty,
        "host": host_info(),
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


SAVE_EVERY_S = 1.0
"""How long a decided cell may wait before the record on disk holds it."""


def record_path(out_dir: Path) -> Path:
    """A fresh record path under `out_dir`, named by the time (two calls in one second keep both records)."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    n = 1
    while path.exists():
        n += 1
        path = out_dir / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{n}.json"
    path.touch()
    return path


def write_record(out_dir: Path, record: dict) -> Path:
    path = record_path(out_dir)
    save_json(path, record)
    return path


def save_json(path: Path, record: dict) -> None:
    """Replace `path` whole (a run killed mid-write leaves the last full record, never half of one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)


def tasks_info(chosen) -> dict:
    """Each task's folder, category and file hashes, as the run found them."""
    return {
        t.id: {
            "dir": str(t.dir),
            "category": t.category,
            "files": {k: v for fw in t.frameworks for k, v in t.file_hashes(fw).items()},
        }
        for t in chosen
    }


def build_record(prov: dict, started: float, spaces, tasks: dict, isolated: bool, cells, complete: bool) -> dict:
    """The validate record; `complete` is false while cells are still being decided (or the run was killed)."""
    unexpected = [c for c in cells if c.unexpected]
    return {
        "schema": SCHEMA,
        **prov,
        "complete": complete,
        "seconds": round(time.monotonic() - started, 1),
        "workspaces": spaces.info,
        "sandbox": {"isolated": isolated},
        "tasks": tasks,
        "summary": {
            "cells": len(cells),
            "as_expected": sum(c.as_expected for c in cells),
            "unexpected": len(unexpected),
            "not_run": sum(c.verdict == NOT_RUN for c in cells),
            "blind": blind_rates(cells),
        },
        "cells": [asdict(c) for c in cells],
    }


def run_validate(args: argparse.Namespace, command: list[str]) -> int:
    chosen, all_tasks = select_tasks(args.tasks_dir.resolve(), args.tasks)
    if not args.no_sandbox and sandbox.unavailable():
        raise agents.CannotStart(NO_SANDBOX.format(why=sandbox.unavailable()))
    gpus_here = len(gpu_inventory())
    started = time.monotonic()
    rows = [
        (task, fw, profile)
        for task in chosen
        for fw in task.frameworks
        if fw in args.frameworks
        for profile in ([p for p in task.profiles if p in args.profiles] if task.profiles else [""])
    ]
    if not rows:
        left_by = f"--frameworks {' '.join(args.frameworks)} --profiles {' '.join(args.profiles)}"
        raise TaskError(f"no task x framework x profile is left by {left_by}")
    print(f"validate: {len(rows)} task x framework x profile rows; {gpus_here} GPU(s) here", flush=True)
    cells: list[Cell] = []
    args.work_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="validate-", dir=args.work_root.resolve()))
    spaces = _Workspaces(scratch, args.source, args.cache_dir)
    path = record_path(args.out or args.results_dir / "validation")
    prov, tasks = provenance(command), tasks_info(chosen)
    saved_at = 0.0

    def save(complete: bool) -> dict:
        nonlocal saved_at
        record = build_record(prov, started, spaces, tasks, not args.no_sandbox, cells, complete)
        save_json(path, record)
        saved_at = time.monotonic()
        return record

    def show(c: Cell) -> None:
        # Decided cells reach the record within SAVE_EVERY_S: a lane killed outright (`timeout -k`'s SIGKILL, which
        # runs no `finally`) keeps its verdicts, and thousands of quick cells do not rewrite the record each time.
        _show(c)
        cells.append(c)
        if time.monotonic() - saved_at >= SAVE_EVERY_S:
            save(complete=False)

    try:
        save(complete=False)
        for task, fw, profile in rows:
            print(f"{task.id:11} {fw:11} {profile or '-':6}", end="", flush=True)
            row = validate_row(
                task, fw, profile, all_tasks, spaces, gpus_here, show, not args.no_sandbox, tuple(args.cases)
            )
            print(_row_tail(row), flush=True)
    except BaseException:
        save(complete=False)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record = save(complete=True)
    unexpected = [c for c in cells if c.unexpected]
    not_run = [c for c in cells if c.verdict == NOT_RUN]
    print(
        f"\n{len(cells)} cells: {record['summary']['as_expected']} as expected, {len(unexpected)} unexpected, "
        f"{len(not_run)} not run (never counted as passed); {record['seconds']:.1f} s"
    )
    for set_name, per_fw in sorted(record["summary"]["blind"].items()):
        for fw, r in sorted(per_fw.items()):
            print(
                f"  blind {set_name} {fw}: correct PASS {r['correct_pass']}/{r['correct']}, wrong FAIL "
                f"{r['wrong_fail']}/{r['wrong']}, wrong with the right citations FAIL {r['cited_fail']}/{r['cited']}"
            )
    for reason in sorted({c.reasons[0] for c in not_run}):
        print(f"  not run: {reason}")
    known = known_misses(args.tasks_dir)
    for c in unexpected:
        where = f"{c.task} {c.framework} {c.profile or '-'} {c.case}"
        tag = " (a known miss: tasks/known_misses.toml)" if miss_key(c) in known else ""
        print(f"  UNEXPECTED {where}: expected {c.expected}, got {c.verdict}{tag}")
        for r in c.reasons[:6]:
            print(f"      {r}")
    print(f"record: {path}")
    return 1 if any(miss_key(c) not in known for c in unexpected) else 0


def miss_key(c: Cell) -> str:
    """The cell as tasks/known_misses.toml names it: `task framework [profile] case`."""
    return " ".join(p for p in (c.task, c.framework, c.profile, c.case) if p)


def known_misses(tasks_dir: Path) -> set[str]:
    """The cells the blind sets found not as expected after their checkers froze (tasks/known_misses.toml): still
    UNEXPECTED in the record and the output, but they do not make `validate` exit 1."""
    path = Path(tasks_dir) / "known_misses.toml"
    if not path.is_file():
        return set()
    return {m["cell"] for m in tomllib.loads(path.read_text()).get("miss", [])}
