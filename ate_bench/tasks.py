"""Task loading: `tasks/<category>/<slug>/` with task.toml, instruction.md, prepare/, gold/, check.py.

The format is specified in ate_bench/README.md. Loading is strict: an unknown key, a wrong type or a
value outside the allowed set is a `TaskError` naming the file, the field, the value and what is
allowed; the CLI turns it into exit status 2.
"""

import re
import tomllib
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from ate_bench.frameworks import FRAMEWORKS

CATEGORIES = ("qa", "operate", "feature")
TOOLS = ("read-only", "edit")


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
    gpus: int
    """GPUs the task needs (0 for Q&A)."""
    frameworks: tuple[str, ...]
    """Frameworks the task is valid for; each needs gold/<framework>/solve.sh."""
    tools: str
    """`read-only` (Q&A: edit tools disabled) or `edit`."""
    check_time_limit_min: float = 30.0
    """Wall-clock limit for check.py."""

    # Filled by load_task from the directory, not read from task.toml.
    dir: Path = Path()

    def instruction(self, framework: str) -> str:
        """instruction.md with `{framework}` replaced; other braces (code) are left alone."""
        return (self.dir / "instruction.md").read_text().replace("{framework}", framework)

    def prepare_dir(self, framework: str) -> Path:
        """Files copied into the workspace before the agent starts (may not exist)."""
        return self.dir / "prepare" / framework

    def gold_script(self, framework: str) -> Path:
        return self.dir / "gold" / framework / "solve.sh"

    @property
    def checker(self) -> Path:
        return self.dir / "check.py"


_TOML_FIELDS = {f.name: f.type for f in fields(TaskSpec) if f.name != "dir"}
_REQUIRED = {f.name for f in fields(TaskSpec) if f.name != "dir" and f.default is MISSING}


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
    for key in sorted(_REQUIRED - raw.keys()):
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
    gpus = get("gpus", (int,), "an integer >= 0")
    if gpus < 0:
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

    task = TaskSpec(
        id=task_id,
        category=category,
        title=title,
        time_limit_min=float(time_limit),
        gpus=gpus,
        frameworks=tuple(frameworks),
        tools=tools,
        check_time_limit_min=float(check_limit) if check_limit is not None else 30.0,
        dir=task_dir,
    )
    # The pieces every run needs: checked here so a broken task fails before a workspace is made.
    for needed in [task_dir / "instruction.md", task.checker, *(task.gold_script(fw) for fw in frameworks)]:
        if not needed.is_file():
            raise TaskError(f"{task_dir}: missing {needed.relative_to(task_dir)}")
    for sub in (task_dir / "prepare").glob("*") if (task_dir / "prepare").is_dir() else []:
        if sub.name not in frameworks:
            raise TaskError(f"{task_dir}: prepare/{sub.name} is not one of the task's frameworks {frameworks}")
    return task


def load_tasks(tasks_dir: Path) -> dict[str, TaskSpec]:
    """Every task under `tasks_dir/<category>/<slug>/`, keyed by id."""
    if not tasks_dir.is_dir():
        raise TaskError(f"tasks directory {tasks_dir} does not exist")
    tasks: dict[str, TaskSpec] = {}
    for toml in sorted(tasks_dir.glob("*/*/task.toml")):
        task = load_task(toml.parent)
        if task.id in tasks:
            raise TaskError(f"task id {task.id!r} is used by both {tasks[task.id].dir} and {task.dir}")
        tasks[task.id] = task
    return tasks


def find_task(tasks_dir: Path, task_id: str) -> TaskSpec:
    tasks = load_tasks(tasks_dir)
    if task_id not in tasks:
        raise TaskError(f"no task {task_id!r} in {tasks_dir}; known: {', '.join(tasks) or '(none)'}")
    return tasks[task_id]
