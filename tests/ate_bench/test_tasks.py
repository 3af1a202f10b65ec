"""Strict task.toml loading: every error names the file, the field, the value and what is allowed."""

import shutil
from pathlib import Path

import pytest

from ate_bench.__main__ import main
from ate_bench.tasks import TaskError, load_task, load_tasks

TOY_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "tasks"


def _copy_toy(tmp_path: Path, edit: str = "", drop: str = "") -> Path:
    dest = tmp_path / "tasks" / "operate" / "toy-train"
    shutil.copytree(TOY_TASKS / "operate" / "toy-train", dest)
    toml = dest / "task.toml"
    lines = [line for line in toml.read_text().splitlines() if not (drop and line.startswith(drop + " "))]
    toml.write_text("\n".join(lines) + "\n" + edit)
    return dest


def test_toy_tasks_load():
    tasks = load_tasks(TOY_TASKS)
    assert sorted(tasks) == ["operate-01", "qa-01"]
    qa = tasks["qa-01"]
    assert qa.tools == "read-only" and qa.frameworks == ("pithtrain",)
    assert "pithtrain workspace" in qa.instruction("pithtrain")
    assert "{framework}" not in qa.instruction("pithtrain")


@pytest.mark.parametrize(
    "edit, drop, message",
    [
        ('colour = "red"\n', "", "unknown field 'colour'"),
        ("", "title", "missing field 'title'"),
        ('tools = "write"\n', "tools", "field 'tools' = 'write' is not allowed; allowed: read-only | edit"),
        ('category = "qa"\n', "category", "field 'category' = 'qa' is not allowed; allowed: the parent"),
        ('id = "op-1"\n', "id", "field 'id' = 'op-1' is not allowed; allowed: 'operate-NN'"),
        ("gpus = -1\n", "gpus", "field 'gpus' = -1"),
        ('gpus = "8"\n', "gpus", "field 'gpus' = '8'"),
        ('frameworks = ["deepspeed"]\n', "frameworks", "pithtrain, megatron-lm, torchtitan"),
        ("time_limit_min = 0\n", "time_limit_min", "field 'time_limit_min' = 0"),
    ],
)
def test_bad_task_toml_names_field_value_and_allowed(tmp_path, edit, drop, message):
    task_dir = _copy_toy(tmp_path, edit, drop)
    with pytest.raises(TaskError, match="task.toml") as err:
        load_task(task_dir)
    assert message in str(err.value)


def test_missing_gold_for_a_listed_framework(tmp_path):
    task_dir = _copy_toy(tmp_path, 'frameworks = ["pithtrain", "torchtitan"]\n', "frameworks")
    with pytest.raises(TaskError, match="missing gold/torchtitan/solve.sh"):
        load_task(task_dir)


def test_cli_exits_2_on_a_bad_task(tmp_path, capsys):
    _copy_toy(tmp_path, 'tools = "write"\n', "tools")
    assert main(["--tasks-dir", str(tmp_path / "tasks"), "list"]) == 2
    assert "field 'tools' = 'write'" in capsys.readouterr().err


def test_cli_exits_2_on_an_unknown_task(capsys):
    assert (
        main(
            [
                "--tasks-dir",
                str(TOY_TASKS),
                "run",
                "--task",
                "qa-99",
                "--framework",
                "pithtrain",
                "--agent",
                "noop",
            ]
        )
        == 2
    )
    assert "known: operate-01, qa-01" in capsys.readouterr().err
