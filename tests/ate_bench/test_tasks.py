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
    assert sorted(tasks) == ["operate-01", "qa-01", "qa-02", "qa-03"]
    qa = tasks["qa-01"]
    assert qa.tools == "read-only" and qa.frameworks == ("pithtrain",)
    assert "pithtrain workspace" in qa.instruction("pithtrain")
    assert "{framework}" not in qa.instruction("pithtrain")
    op = tasks["operate-01"]
    assert op.profiles == ("smoke", "gpu1", "paper") and op.check_profile(None) == "smoke"
    assert [op.gpus_for(p) for p in op.profiles] == [0, 1, 8]
    assert "(gpu1 profile)" in op.instruction("pithtrain", "gpu1")
    assert op.prepare_dir("pithtrain", "smoke") == op.dir / "prepare" / "smoke" / "pithtrain"
    assert [p.name for p in op.wrong_cases("pithtrain")] == ["edited-train.sh"]
    with pytest.raises(TaskError, match="profiles: smoke, gpu1, paper"):
        op.check_profile("huge")
    with pytest.raises(TaskError, match="has no profiles"):
        qa.check_profile("smoke")


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
        ("gpus = 1\n", "", "field 'gpus' = 1 is not allowed; allowed: nothing with profiles"),
        ('profiles = ["tiny"]\n', "profiles", "field 'profiles' = ['tiny']"),
        ('[unrunnable]\n"pithtrain/huge" = "x"\n', "", "keys among ['pithtrain/smoke', 'pithtrain/gpu1'"),
    ],
)
def test_bad_task_toml_names_field_value_and_allowed(tmp_path, edit, drop, message):
    task_dir = _copy_toy(tmp_path, edit, drop)
    with pytest.raises(TaskError, match="task.toml") as err:
        load_task(task_dir)
    assert message in str(err.value)


def test_stray_wrong_case_and_prepare_dir_are_errors(tmp_path):
    task_dir = _copy_toy(tmp_path)
    (task_dir / "wrong" / "pithtrain" / "notes.txt").write_text("")
    with pytest.raises(TaskError, match=r"notes.txt is neither .md \(a final message\) nor .sh"):
        load_task(task_dir)
    (task_dir / "wrong" / "pithtrain" / "notes.txt").unlink()
    (task_dir / "prepare" / "pithtrain").mkdir()
    with pytest.raises(TaskError, match="keeps prepare/<profile>/<framework>/"):
        load_task(task_dir)


def test_task_file_hashes_name_the_task_version():
    hashes = load_tasks(TOY_TASKS)["qa-02"].file_hashes("pithtrain")
    assert sorted(hashes) == [
        "qa/toy-cli/check.py",
        "qa/toy-cli/gold/pithtrain/solve.sh",
        "qa/toy-cli/instruction.md",
        "qa/toy-cli/key.toml",
        "qa/toy_keycheck.py",
    ]
    assert all(len(h) == 64 for h in hashes.values())


def test_a_framework_whose_every_profile_is_unrunnable_needs_no_gold(tmp_path):
    edit = 'frameworks = ["pithtrain", "torchtitan"]\n[unrunnable]\n'
    edit += "".join(f'"torchtitan/{p}" = "no gold yet"\n' for p in ("smoke", "gpu1"))
    task_dir = _copy_toy(tmp_path, edit, "frameworks")
    with pytest.raises(TaskError, match="missing gold/torchtitan/solve.sh"):  # paper is still runnable
        load_task(task_dir)
    (task_dir / "task.toml").write_text((task_dir / "task.toml").read_text() + '"torchtitan/paper" = "8 GPUs"\n')
    task = load_task(task_dir)
    assert task.gold_unrunnable("torchtitan") == "smoke: no gold yet; gpu1: no gold yet; paper: 8 GPUs"
    assert task.gold_unrunnable("pithtrain") == ""


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
    assert "known: operate-01, qa-01, qa-02, qa-03" in capsys.readouterr().err
