"""Task loading: `tasks/<category>/<slug>/` with task.toml, instruction.md, prepare/, gold/, wrong/, check.py.

The format is specified in ate_bench/README.md. Loading is strict: an unknown key, a wrong type or a
value outside the allowed set is a `TaskError` naming the file, the field, the value and what is
allowed; the CLI turns it into exit status 2.
"""

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from ate_bench.frameworks import FRAMEWORKS
from ate_bench.workspace import file_sha256

CATEGORIES = ("qa", "operate", "feature")
TOOLS = ("read-only", "edit")
# The GPUs each profile needs, fixed here rather than per task so every task's `paper` means the same.
PROFILE_GPUS = {"smoke": 0, "gpu1": 1, "paper": 8}
WRONG_SUFFIXES = (".md", ".sh")
"""wrong/<framework>/<case>.md is a final message taken verbatim; <case>.sh is run like the gold."""


class TaskError(ValueError):
    """A task directory that does not follow the task format."""


@dataclass(frozen=True)
class TaskSpec:
    id: str
    """`<category>-NN`, e.g. `qa-01`; unique across the tasks directory."""
    category: str
    """One of CATEGORIES; also the name of the directory above the task's."""
    title: str
    """One line, shown by `list` and in reports."""
    time_limit_min: float
    """Wall-clock limit for the agent; its whole process tree is killed when it runs out."""
    frameworks: tuple[str, ...]
    """Frameworks the task is valid for; each needs gold/<framework>/solve.sh."""
    tools: str
    """`read-only` (Q&A: edit tools disabled) or `edit`."""
    gpus: int = 0
    """GPUs the task needs (0 for Q&A); required without `profiles`, not allowed with them."""
    profiles: tuple[str, ...] = ()
    """Sizes the task runs at (keys of PROFILE_GPUS); the first is `run`'s default. Empty for Q&A."""
    unrunnable: dict[str, str] = field(default_factory=dict)
    """`"<framework>/<profile>"` -> why its gold cannot run anywhere (`validate` records "not run")."""
    check_time_limit_min: float = 30.0
    """Wall-clock limit for check.py."""

    # Filled by load_task from the directory, not read from task.toml.
    dir: Path = Path()

    def instruction(self, framework: str, profile: str = "") -> str:
        """instruction.md with `{framework}` and `{profile}` replaced; other braces (code) are left alone."""
        text = (self.dir / "instruction.md").read_text().replace("{framework}", framework)
        return text.replace("{profile}", profile)

    def prepare_dir(self, framework: str, profile: str = "") -> Path:
        """Files copied into the workspace before the agent starts (may not exist)."""
        return self.dir / "prepare" / profile / framework if profile else self.dir / "prepare" / framework

    def gold_script(self, framework: str) -> Path:
        return self.dir / "gold" / framework / "solve.sh"

    def wrong_cases(self, framework: str) -> list[Path]:
        """wrong/<framework>/*.md and *.sh, sorted by name."""
        d = self.dir / "wrong" / framework
        return sorted(p for p in d.iterdir() if p.suffix in WRONG_SUFFIXES) if d.is_dir() else []

    def gold_unrunnable(self, framework: str) -> str:
        """Why no gold runs on `framework` (every profile of it is in [unrunnable]); "" when one does.

        Such a framework needs no gold script: validate still proves its checker with noop and wrong cases."""
        reasons = [self.unrunnable.get(f"{framework}/{p}", "") for p in self.profiles]
        return (
            "; ".join(f"{p}: {r}" for p, r in zip(self.profiles, reasons, strict=True))
            if all(reasons) and reasons
            else ""
        )

    def gpus_for(self, profile: str) -> int:
        return PROFILE_GPUS[profile] if profile else self.gpus

    def check_profile(self, profile: str | None) -> str:
        """The profile a run uses: `profile`, or the task's first; "" for a task without profiles."""
        if profile is None or profile == "":
            return self.profiles[0] if self.profiles else ""
        if not self.profiles:
            raise TaskError(f"task {self.id} has no profiles; leave --profile out")
        if profile not in self.profiles:
            raise TaskError(f"task {self.id}: --profile {profile!r}; the task's profiles: {', '.join(self.profiles)}")
        return profile

    @property
    def checker(self) -> Path:
        return self.dir / "check.py"

    @property
    def key_file(self) -> Path:
        """The Q&A answer key (facts per framework); may not exist."""
        return self.dir / "key.toml"

    def file_hashes(self, framework: str) -> dict[str, str]:
        """sha256 of what decides a verdict: instruction, checker, key, gold, and the category's helpers.

        Paths are relative to the tasks directory, so a record names the task version it ran.
        """
        root = self.dir.parent.parent
        files = [self.dir / "instruction.md", self.checker, self.key_file, *sorted(self.dir.glob("*.py"))]
        files += sorted(p for p in (self.dir / "gold" / framework).rglob("*") if p.is_file())
        files += sorted(self.dir.parent.glob("*.py"))  # tasks/<category>/ helpers the checkers import
        return {p.relative_to(root).as_posix(): file_sha256(p) for p in dict.fromkeys(files) if p.is_file()}


_TOML_FIELDS = [f.name for f in fields(TaskSpec) if f.name != "dir"]
_REQUIRED = ("id", "category", "title", "time_limit_min", "frameworks", "tools")


def _fail(path: Path, name: str, value: object, allowed: str) -> TaskError:
    return TaskError(f"{path}: field {name!r} = {value!r} is not allowed; allowed: {allowed}")


def load_task(task_dir: Path) -> TaskSpec:
    task_dir = task_dir.resolve()  # the checker and gold script run with the workspace as cwd
    path = task_dir / "task.toml"
    if not path.is_file():
        raise TaskError(f"{task_dir}: no task.toml")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: not valid TOML: {e}") from e
    for key in raw:
        if key not in _TOML_FIELDS:
            raise TaskError(f"{path}: unknown field {key!r}; allowed: {', '.join(_TOML_FIELDS)}")
    for key in (k for k in _REQUIRED if k not in raw):
        raise TaskError(f"{path}: missing field {key!r}")

    def get(name: str, types: tuple[type, ...], allowed: str):
        value = raw.get(name)
        if name not in raw:
            return None
        if not isinstance(value, types) or isinstance(value, bool):
            raise _fail(path, name, value, allowed)
        return value

    category = get("category", (str,), " | ".join(CATEGORIES))
    if category not in CATEGORIES:
        raise _fail(path, "category", category, " | ".join(CATEGORIES))
    if task_dir.parent.name != category:
        raise _fail(path, "category", category, f"the parent directory's name, {task_dir.parent.name!r}")
    task_id = get("id", (str,), f"'{category}-NN'")
    if not re.fullmatch(rf"{category}-\d\d", task_id):
        raise _fail(path, "id", task_id, f"'{category}-NN' (two digits)")
    title = get("title", (str,), "a non-empty string")
    if not title.strip():
        raise _fail(path, "title", title, "a non-empty string")
    time_limit = get("time_limit_min", (int, float), "a number of minutes > 0")
    if time_limit <= 0:
        raise _fail(path, "time_limit_min", time_limit, "a number of minutes > 0")
    profiles = get("profiles", (list,), f"a non-empty list of {', '.join(PROFILE_GPUS)}")
    if profiles is not None and (
        not profiles or any(p not in PROFILE_GPUS for p in profiles) or len(set(profiles)) != len(profiles)
    ):
        raise _fail(path, "profiles", profiles, f"a non-empty list of distinct {', '.join(PROFILE_GPUS)}")
    if profiles is not None and category == "qa":
        raise _fail(path, "profiles", profiles, "nothing for a qa task (leave the field out)")
    gpus = get("gpus", (int,), "an integer >= 0")
    if profiles is None and gpus is None:
        raise TaskError(f"{path}: missing field 'gpus' (a task without profiles says how many GPUs it needs)")
    if profiles is not None and gpus is not None:
        fixed = ", ".join(f"{k} {v}" for k, v in PROFILE_GPUS.items())
        raise _fail(path, "gpus", gpus, f"nothing with profiles: GPUs are fixed per profile ({fixed})")
    if gpus is not None and gpus < 0:
        raise _fail(path, "gpus", gpus, "an integer >= 0")
    frameworks = get("frameworks", (list,), f"a non-empty list of {', '.join(FRAMEWORKS)}")
    if not frameworks or any(fw not in FRAMEWORKS for fw in frameworks):
        raise _fail(path, "frameworks", frameworks, f"a non-empty list of {', '.join(FRAMEWORKS)}")
    tools = get("tools", (str,), " | ".join(TOOLS))
    if tools not in TOOLS:
        raise _fail(path, "tools", tools, " | ".join(TOOLS))
    if category == "qa" and tools != "read-only":
        raise _fail(path, "tools", tools, "'read-only' for a qa task")
    check_limit = get("check_time_limit_min", (int, float), "a number of minutes > 0")
    if check_limit is not None and check_limit <= 0:
        raise _fail(path, "check_time_limit_min", check_limit, "a number of minutes > 0")

    cells = [f"{fw}/{p}" for fw in frameworks for p in profiles or ()]
    unrunnable = get("unrunnable", (dict,), f"a table of '<framework>/<profile>' = reason, keys among {cells}")
    for cell, reason in (unrunnable or {}).items():
        if cell not in cells or not isinstance(reason, str) or not reason.strip():
            raise _fail(path, f"unrunnable.{cell!r}", reason, f"keys among {cells}, each a non-empty reason")

    task = TaskSpec(
        id=task_id,
        category=category,
        title=title,
        time_limit_min=float(time_limit),
        frameworks=tuple(frameworks),
        tools=tools,
        gpus=gpus or 0,
        profiles=tuple(profiles or ()),
        unrunnable=dict(unrunnable or {}),
        check_time_limit_min=float(check_limit) if check_limit is not None else 30.0,
        dir=task_dir,
    )
    # The pieces every run needs: checked here so a broken task fails before a workspace is made.
    golds = [task.gold_script(fw) for fw in frameworks if not task.gold_unrunnable(fw)]
    for needed in [task_dir / "instruction.md", task.checker, *golds]:
        if not needed.is_file():
            raise TaskError(f"{task_dir}: missing {needed.relative_to(task_dir)}")
    prepare = task_dir / "prepare"
    for sub in sorted(prepare.iterdir()) if prepare.is_dir() else []:
        if not task.profiles and sub.name not in frameworks:
            raise TaskError(f"{task_dir}: prepare/{sub.name} is not one of the task's frameworks {frameworks}")
        if task.profiles and sub.name not in task.profiles:
            raise TaskError(
                f"{task_dir}: prepare/{sub.name}: a task with profiles keeps prepare/<profile>/<framework>/; "
                f"profiles: {profiles}"
            )
        for fw in sorted(sub.iterdir()) if task.profiles and sub.is_dir() else []:
            if fw.name not in frameworks:
                raise TaskError(
                    f"{task_dir}: prepare/{sub.name}/{fw.name} is not one of the task's frameworks {frameworks}"
                )
    wrong = task_dir / "wrong"
    for sub in sorted(wrong.iterdir()) if wrong.is_dir() else []:
        if sub.name not in frameworks:
            raise TaskError(f"{task_dir}: wrong/{sub.name} is not one of the task's frameworks {frameworks}")
        for case in sorted(sub.iterdir()):
            if case.suffix not in WRONG_SUFFIXES:
                raise TaskError(
                    f"{task_dir}: wrong/{sub.name}/{case.name} is neither .md (a final message) nor .sh (a script)"
                )
    return task


def _peek_id(toml: Path) -> object:
    try:
        return tomllib.loads(toml.read_text()).get("id")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def load_tasks(tasks_dir: Path, only: Callable[[str], bool] = lambda task_id: True) -> dict[str, TaskSpec]:
    """Every task under `tasks_dir/<category>/<slug>/`, keyed by id; with `only`, the tasks whose id it
    accepts (a task.toml whose id cannot be read is always loaded, so its error shows)."""
    if not tasks_dir.is_dir():
        raise TaskError(f"tasks directory {tasks_dir} does not exist")
    tasks: dict[str, TaskSpec] = {}
    for toml in sorted(tasks_dir.glob("*/*/task.toml")):
        task_id = _peek_id(toml)
        if isinstance(task_id, str) and not only(task_id):
            continue  # another category's task, possibly half-written: not this call's business
        task = load_task(toml.parent)
        if task.id in tasks:
            raise TaskError(f"task id {task.id!r} is used by both {tasks[task.id].dir} and {task.dir}")
        tasks[task.id] = task
    return dict(sorted(tasks.items()))


def task_ids(tasks_dir: Path) -> list[str]:
    """The ids the task.toml files under `tasks_dir` declare (read, not checked)."""
    found = (_peek_id(t) for t in tasks_dir.glob("*/*/task.toml")) if tasks_dir.is_dir() else ()
    return sorted(i for i in found if isinstance(i, str))


def find_task(tasks_dir: Path, task_id: str) -> TaskSpec:
    """The task `task_id`, loaded alone: a broken task elsewhere does not stop a run of this one."""
    if not tasks_dir.is_dir():
        raise TaskError(f"tasks directory {tasks_dir} does not exist")
    tomls = sorted(tasks_dir.glob("*/*/task.toml"))
    found = [t for t in tomls if _peek_id(t) == task_id]
    if len(found) > 1:
        raise TaskError(f"task id {task_id!r} is used by both {found[0].parent} and {found[1].parent}")
    if not found:
        unread = [str(t) for t in tomls if not isinstance(_peek_id(t), str)]
        hint = f"; these task.toml files give no id: {', '.join(unread)}" if unread else ""
        known = ", ".join(task_ids(tasks_dir)) or "(none)"
        raise TaskError(f"no task {task_id!r} in {tasks_dir}; known: {known}{hint}")
    return load_task(found[0].parent)
