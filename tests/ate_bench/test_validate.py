"""`validate` on the toy tasks: the matrix, its record, and that a checker passing a wrong answer is caught."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ate_bench import validate
from ate_bench.__main__ import main
from ate_bench.tasks import TaskSpec
from ate_bench.validate import cases_for, shifted, stripped, with_right_citations

TOY_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "tasks"


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    monkeypatch.setattr(validate, "gpu_inventory", lambda: [])


def _validate(tmp_path: Path, tasks_dir: Path, *tasks: str) -> tuple[int, dict]:
    out = tmp_path / "out"
    argv = ["--tasks-dir", str(tasks_dir), "validate", "--tasks", *tasks]
    code = main([*argv, "--out", str(out), "--work-root", str(tmp_path / "work")])
    (path,) = out.glob("*.json")
    path.rename(path.with_suffix(".seen"))  # the next call's record is the only .json
    return code, json.loads(path.with_suffix(".seen").read_text())


def _cells(record: dict) -> dict[tuple, dict]:
    return {(c["task"], c["profile"], c["case"]): c for c in record["cells"]}


def test_shift_and_strip_every_citation():
    msg = "See `a/b.py:10` and c.toml:3-5.\n<final-answer>\nx.py:1\n</final-answer>\n"
    assert shifted(msg) == "See `a/b.py:50` and c.toml:43-45.\n<final-answer>\nx.py:41\n</final-answer>\n"
    assert stripped(msg) == "See  and .\n<final-answer>\n\n</final-answer>\n"


def test_right_citations_are_added_to_the_same_slots_and_the_explanation():
    correct = "<final-answer>\nWhy.\nentry: a.py:3\nkind: fused\nname: b.toml:1-2, c.py:9\n</final-answer>\n"
    wrong = "Notes a.py:1\n<final-answer>\nentry: x.py:5\nentry: z.py:7\nkind: separate\n"
    wrong += "name: absent, y.py:1\n</final-answer>\n"
    assert with_right_citations(wrong, correct) == (
        "Notes a.py:1\n<final-answer>\nThe lines that show it: a.py:3, b.toml:1-2, c.py:9.\nentry: x.py:5\n"
        "entry: z.py:7, a.py:3\nkind: separate\nname: absent, y.py:1, b.toml:1-2, c.py:9\n</final-answer>\n"
    )


def test_blind_answers_are_cells_with_rates_per_set(tmp_path, capsys):
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    lines = {"entry": ("pithtrain/__main__.py", "def main("), "name": ("pyproject.toml", 'name = "pithtrain"')}
    root = Path(__file__).resolve().parents[2]
    at = {
        k: next(i for i, t in enumerate((root / f).read_text().splitlines(), 1) if t.startswith(s))
        for k, (f, s) in lines.items()
    }
    right = f"entry: pithtrain/__main__.py:{at['entry']}\nname: pyproject.toml:{at['name']}\n"
    blind = tasks / "qa" / "toy-cli" / "blind" / "setA" / "pithtrain"
    blind.mkdir(parents=True)
    (blind / "correct-1.md").write_text(f"<final-answer>\nmain and the metadata.\n{right}</final-answer>\n")
    wrong = "<final-answer>\nThe entry is the config module.\nentry: pithtrain/config.py:1\n"
    wrong += "name: pyproject.toml:1\n</final-answer>\n"
    (blind / "wrong-1.md").write_text(wrong)
    (blind / "wrong-1.why").write_text("config.py is not the entry point")
    (blind / "wrong-2.md").write_text(f"<final-answer>\nRight after all.\n{right}</final-answer>\n")
    (blind / "wrong-2.md.adjudicated").write_text("correct: its slots are right")
    (tasks / "qa" / "blind_sets.toml").write_text('[setA]\npithtrain_commit = "HEAD"\n')
    code, rec = _validate(tmp_path, tasks, "qa-02")
    assert code == 0, capsys.readouterr().out
    cells = _cells(rec)
    assert cells[("qa-02", "", "setA/correct-1.md")]["verdict"] == "PASS"
    assert cells[("qa-02", "", "setA/wrong-1.md")]["verdict"] == "FAIL"
    # The wrong answer with the correct one's citations appended still fails: its first citation lands nowhere.
    assert cells[("qa-02", "", "setA/wrong-1+cited.md")]["kind"] == "blind-cited"
    assert cells[("qa-02", "", "setA/wrong-1+cited.md")]["verdict"] == "FAIL"
    assert cells[("qa-02", "", "setA/wrong-2.md [adjudicated correct]")]["expected"] == "PASS"
    rates = {"correct_pass": 2, "correct": 2, "wrong_fail": 1, "wrong": 1, "cited_fail": 1, "cited": 1}
    assert rec["summary"]["blind"] == {"setA": {"pithtrain": rates}}
    assert "blind setA pithtrain: correct PASS 2/2, wrong FAIL 1/1" in capsys.readouterr().out
    # Written against another pithtrain tree: checked against that tree, whose lines differ from HEAD's.
    old = "681af61"  # pithtrain/__main__.py's main() stood 8 lines higher there
    old_main = subprocess.run(["git", "show", f"{old}:pithtrain/__main__.py"], cwd=root, capture_output=True, text=True)
    then = next(i for i, t in enumerate(old_main.stdout.splitlines(), 1) if t.startswith("def main("))
    assert then != at["entry"]
    (blind / "correct-1.md").write_text(f"<final-answer>\nentry: pithtrain/__main__.py:{then}\nname: pyproject.toml:"
                                        f"{at['name']}\n</final-answer>\n")  # fmt: skip
    (tasks / "qa" / "blind_sets.toml").write_text(f'[setA]\npithtrain_commit = "{old}"\n')
    code, rec = _validate(tmp_path, tasks, "qa-02")
    assert _cells(rec)[("qa-02", "", "setA/correct-1.md")]["verdict"] == "PASS"
    assert _cells(rec)[("qa-02", "", "gold")]["verdict"] == "PASS"  # the gold still answers on HEAD's tree
    # A commit that is not in the history: the cells are not run, with the reason.
    (tasks / "qa" / "blind_sets.toml").write_text('[setA]\npithtrain_commit = "0123456789abcdef"\n')
    code, rec = _validate(tmp_path, tasks, "qa-02")
    cell = _cells(rec)[("qa-02", "", "setA/correct-1.md")]
    assert code == 0 and cell["verdict"] == "not run"
    assert cell["reasons"] == ["commit 0123456789ab, the tree setA's writers read, is not in this repository's history"]


def test_the_toy_matrix_is_green_and_recorded(tmp_path, capsys):
    code, rec = _validate(tmp_path, TOY_TASKS, "operate-01", "qa-0[23]")
    out = capsys.readouterr().out
    assert code == 0, out
    assert rec["schema"] == "ate-bench-validation-1" and rec["complete"] is True
    assert {"commit", "dirty_paths", "host", "command", "date", "seconds", "workspaces", "tasks"} <= set(rec)
    assert len(rec["workspaces"]["pithtrain"]["tree_sha256"]) == 64
    assert rec["sandbox"] == {"isolated": True}  # the checkers ran in the sandbox
    assert "qa/toy-cli/key.toml" in rec["tasks"]["qa-02"]["files"]
    cells = _cells(rec)
    expected_qa = ["gold", "noop", "fabricated.md", "wrong-lines.md", "wrong-mechanism.md", "shifted", "stripped"]
    for case in [*expected_qa, "other-task"]:
        cell = cells[("qa-02", "", case)]
        assert cell["verdict"] == cell["expected"] == ("PASS" if case == "gold" else "FAIL"), cell
    # Each wrong answer fails for its own reason.
    assert "fabricated" in cells[("qa-02", "", "fabricated.md")]["reasons"][0]
    assert "does not exist" in cells[("qa-02", "", "shifted")]["reasons"][0]
    assert cells[("operate-01", "smoke", "edited-train.sh")]["reasons"] == ["train.sh was modified or removed"]
    assert cells[("operate-01", "smoke", "gold")]["reasons"] == []  # its train.sh log is closed by exit-time
    # Profiles this machine cannot run are cells "not run", with the reason, never passed.
    for profile, n in (("gpu1", 1), ("paper", 8)):
        cell = cells[("operate-01", profile, "gold")]
        assert cell["verdict"] == "not run"
        assert cell["reasons"] == [f"profile {profile} needs {n} GPU(s); this machine has 0"]
    assert rec["summary"] == {"cells": 25, "as_expected": 19, "unexpected": 0, "not_run": 6, "blind": {}}
    assert "qa-02       pithtrain   -      gold:PASS noop:FAIL" in out and "record: " in out


def test_a_checker_that_passes_a_wrong_answer_fails_validate(tmp_path, capsys):
    # toy-version's checker wants `pyproject.toml:<n>` but never checks the line exists.
    code, rec = _validate(tmp_path, TOY_TASKS, "qa-01")
    assert code == 1
    assert [c["case"] for c in rec["cells"] if c["verdict"] != c["expected"]] == ["shifted"]
    assert "UNEXPECTED qa-01 pithtrain - shifted: expected FAIL, got PASS" in capsys.readouterr().out


def test_error_is_never_as_expected_and_read_only_workspaces_are_watched(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    wrong = tasks / "qa" / "toy-cli" / "wrong" / "pithtrain"
    (wrong / "edits.sh").write_text("echo '# edited' >> pyproject.toml\n")
    (wrong / "half-built.sh").write_text("echo 'not built' >&2\nexit 3\n")  # an empty answer would FAIL anyway
    (tasks / "qa" / "toy-meta" / "check.py").write_text("import sys\nsys.exit(1 / 0)\n")
    code, rec = _validate(tmp_path, tasks, "qa-0[23]")
    assert code == 1
    cells = _cells(rec)
    edits = cells[("qa-02", "", "edits.sh")]
    assert edits["verdict"] == "ERROR" and "changed the read-only workspace" in edits["reasons"][0]
    # A near miss whose script fails is ERROR, not the FAIL its missing answer would get.
    half = cells[("qa-02", "", "half-built.sh")]
    assert half["verdict"] == "ERROR" and half["reasons"] == ["the near miss's script exited 3: not built"]
    # The next case got a fresh workspace: the gold-derived cases still behave.
    assert cells[("qa-02", "", "shifted")]["verdict"] == "FAIL"
    # A checker that crashes is ERROR on every case, the FAIL-expected ones included.
    meta = [c for c in rec["cells"] if c["task"] == "qa-03"]
    assert {c["verdict"] for c in meta} == {"ERROR"}
    assert "ZeroDivisionError" in meta[1]["reasons"][0]


def test_a_near_miss_must_fail_for_the_mistake_it_declares(tmp_path):
    """`# FAILs for: <regex>`: a FAIL none of whose reasons match is ERROR (the wrong case broke on something else and
    proves nothing about the checker); a FAIL that matches stays FAIL."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    wrong = tasks / "qa" / "toy-cli" / "wrong" / "pithtrain"
    (wrong / "on-its-mistake.sh").write_text("#!/usr/bin/env bash\n# FAILs for: no <final-answer> block\ntrue\n")
    (wrong / "on-another.sh").write_text("#!/usr/bin/env bash\n# FAILs for: cites line \\d+ of\ntrue\n")
    code, rec = _validate(tmp_path, tasks, "qa-02")
    cells = _cells(rec)
    assert cells[("qa-02", "", "on-its-mistake.sh")]["verdict"] == "FAIL"
    other = cells[("qa-02", "", "on-another.sh")]
    assert code == 1 and other["verdict"] == "ERROR"
    assert other["reasons"][:2] == [
        r"FAILed, but not for its mistake (no reason matches its '# FAILs for: cites line \d+ of')",
        "no <final-answer> block",
    ]


def test_unrunnable_cells_are_not_run_and_the_rest_still_runs(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    # A provided script whose log is never closed: reported on the cells that ran it.
    train = tasks / "operate" / "toy-train" / "prepare" / "smoke" / "pithtrain" / "train.sh"
    train.write_text(train.read_text().replace("trap ", "# trap "))
    code, rec = _validate(tmp_path, tasks, "operate-01")
    (note,) = [r for r in _cells(rec)[("operate-01", "smoke", "edited-train.sh")]["reasons"] if "exit-time" in r]
    assert note.startswith("1 provided-script log(s) without an exit-time line: artifacts/train-")
    # Where the framework cannot run the task, neither the gold nor a near miss (which breaks it, or runs the same
    # trainer) runs; the noop still proves the checker.
    toml = tasks / "operate" / "toy-train" / "task.toml"
    toml.write_text(toml.read_text() + '[unrunnable]\n"pithtrain/smoke" = "needs CUDA here"\n')
    code, rec = _validate(tmp_path, tasks, "operate-01")
    assert code == 0
    cells = _cells(rec)
    for case in ("gold", "edited-train.sh"):
        assert cells[("operate-01", "smoke", case)]["verdict"] == "not run"
        assert cells[("operate-01", "smoke", case)]["reasons"] == ["unrunnable in task.toml: needs CUDA here"]
    assert cells[("operate-01", "smoke", "noop")]["verdict"] == "FAIL"


def test_a_killed_validate_keeps_the_cells_it_decided(tmp_path, monkeypatch):
    """A GPU lane killed at its time limit: the record on disk holds every cell decided before, marked incomplete."""
    real, seen = validate.run_checker, []

    def killed_on_the_third(*args, **kwargs):
        if len(seen) == 2:
            raise KeyboardInterrupt  # as the SIGINT/SIGTERM of `timeout` would stop it
        seen.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(validate, "run_checker", killed_on_the_third)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        main(["--tasks-dir", str(TOY_TASKS), "validate", "--tasks", "qa-02", "--out", str(out), "--work-root",
              str(tmp_path / "work")])  # fmt: skip
    (path,) = out.glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["complete"] is False
    assert [c["case"] for c in rec["cells"]] == ["gold", "noop"]
    assert rec["cells"][0]["verdict"] == "PASS" and rec["summary"]["cells"] == 2
    assert not list(out.glob("*.tmp"))


def test_validate_says_when_nothing_matches(tmp_path, capsys):
    argv = ["--tasks-dir", str(TOY_TASKS), "validate", "--tasks", "feature-*", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "no task matches feature-* in" in capsys.readouterr().err


def test_a_broken_task_of_another_category_does_not_stop_validate(tmp_path, capsys):
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    (tasks / "operate" / "toy-train" / "gold" / "pithtrain" / "solve.sh").unlink()
    code, rec = _validate(tmp_path, tasks, "qa-03")
    assert code == 0 and {c["task"] for c in rec["cells"]} == {"qa-03"}
    # Validating the broken one says what is missing.
    assert main(["--tasks-dir", str(tasks), "validate", "--tasks", "operate-01", "--out", str(tmp_path)]) == 2
    assert "toy-train: missing gold/pithtrain/solve.sh" in capsys.readouterr().err


def test_generated_cases_per_category(tmp_path):
    def spec(task_id: str, **kw) -> TaskSpec:
        category = task_id.split("-")[0]
        kw.setdefault("profiles", ("smoke",) if category != "qa" else ())
        return TaskSpec(task_id, category, "t", 1.0, ("pithtrain",), "edit", dir=tmp_path / task_id, **kw)

    tasks = {t.id: t for t in (spec("feature-01"), spec("feature-02"), spec("operate-01"), spec("qa-01"))}
    names = lambda cases: [c.name for c in cases]  # noqa: E731
    feature = cases_for(tasks["feature-01"], "pithtrain", "smoke", tasks)
    assert names(feature) == ["gold", "noop", "other-task"]
    assert feature[2].script == tmp_path / "feature-02" / "gold" / "pithtrain" / "solve.sh"
    assert names(cases_for(tasks["operate-01"], "pithtrain", "smoke", tasks)) == ["gold", "noop"]
    qa = cases_for(tasks["qa-01"], "pithtrain", "", tasks)
    assert names(qa) == ["gold", "noop", "shifted", "stripped", "other-task"]
    assert qa[-1].skip == "no other qa task lists pithtrain"
    # The other task's gold cannot run on this cell: its case is not run, with the reason.
    tasks["feature-02"] = spec("feature-02", unrunnable={"pithtrain/smoke": "needs CUDA"})
    other = cases_for(tasks["feature-01"], "pithtrain", "smoke", tasks)[2]
    assert other.skip == "feature-02's gold cannot run on pithtrain/smoke: needs CUDA"


def test_a_feature_near_miss_must_fail_at_a_check_of_the_feature(tmp_path):
    """A feature near miss whose header names nothing gets FEATURE_MISTAKE: the op, aux, seam and branch verdicts and
    the switch's match; a crashed or out-of-memory run (training, a base run under liveness, the branch run) does not.
    Its own `# FAILs for:` line wins."""
    wrong = tmp_path / "feature-01" / "wrong" / "pithtrain"
    wrong.mkdir(parents=True)
    (wrong / "plain.sh").write_text("#!/usr/bin/env bash\ntrue\n")
    (wrong / "named.sh").write_text("#!/usr/bin/env bash\n# FAILs for: ^seam: the model never called\ntrue\n")
    spec = TaskSpec("feature-01", "feature", "t", 1.0, ("pithtrain",), "edit", dir=tmp_path / "feature-01")
    near = {c.name: c.fails_for for c in cases_for(spec, "pithtrain", "smoke", {"feature-01": spec})}
    assert near["plain.sh"] == validate.FEATURE_MISTAKE and near["named.sh"] == "^seam: the model never called"
    mistakes = [
        "op: output 0 differs from the reference by 7.63e-01 > 1e-04 (torch.float32, seed 1)",
        "aux: output 0 differs from the reference by 1.05e-01 > 1e-04",
        "seam: the model passes top_k [256]; the task says 3",
        "branch (--set model.num_experts_per_tok=1): 896 tokens' y got no gradient in one call",
        "liveness: with the feature on, the losses stay within the base envelope",
    ]
    crashes = [
        "training: verify.sh with the feature on has a non-finite loss: [nan]",
        "liveness: verify.sh exited 1: 'torch.OutOfMemoryError: CUDA out of memory'",
        "branch: verify.sh --set model.num_experts_per_tok=1 ran past 600 s",
        "training, seam and liveness: not checked, since the op check failed",
        "artifacts/feature.json is missing",
    ]
    assert all(re.search(validate.FEATURE_MISTAKE, m) for m in mistakes)
    assert not any(re.search(validate.FEATURE_MISTAKE, c) for c in crashes)


def test_a_known_miss_is_reported_but_does_not_fail_validate(tmp_path, capsys):
    """A wrong answer the checker passes: UNEXPECTED and exit 1; listed in tasks/known_misses.toml: still
    UNEXPECTED in the record and the output, tagged as known, and exit 0."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    wrong = tasks / "qa" / "toy-cli" / "wrong" / "pithtrain" / "right-after-all.md"
    gold = tasks / "qa" / "toy-cli" / "gold" / "pithtrain"
    env = {"GOLD_DIR": str(gold), "PATH": "/usr/bin:/bin"}
    repo = Path(__file__).resolve().parents[2]
    answer = subprocess.run(["bash", str(gold / "solve.sh")], cwd=repo, capture_output=True, text=True, env=env)
    wrong.write_text(answer.stdout)  # the gold's answer, labelled wrong: the checker passes it
    code, rec = _validate(tmp_path, tasks, "qa-02")
    assert code == 1 and _cells(rec)[("qa-02", "", "right-after-all.md")]["verdict"] == "PASS"
    (tasks / "known_misses.toml").write_text('[[miss]]\ncell = "qa-02 pithtrain right-after-all.md"\nwhy = "test"\n')
    capsys.readouterr()
    code, rec = _validate(tmp_path, tasks, "qa-02")
    assert code == 0 and rec["summary"]["unexpected"] == 1
    assert "right-after-all.md: expected FAIL, got PASS (a known miss" in capsys.readouterr().out


def test_cases_narrows_each_row_to_the_named_cases(tmp_path):
    """--cases splits a long row across calls (the gpu1 feature rows on one GPU): only the matching cases run."""
    out = tmp_path / "out"
    argv = ["--tasks-dir", str(TOY_TASKS), "validate", "--tasks", "qa-02", "--cases", "gold", "wrong-*"]
    assert main([*argv, "--out", str(out), "--work-root", str(tmp_path / "work")]) == 0
    (path,) = out.glob("*.json")
    cases = [c["case"] for c in json.loads(path.read_text())["cells"]]
    assert cases == ["gold", "wrong-lines.md", "wrong-mechanism.md"], cases


def test_cells_of_a_framework_whose_requirements_are_missing_are_not_run(monkeypatch, tmp_path):
    """TorchTitan's feature and operate scripts run with the harness's Python: without its requirements the cells are
    "not run" with the install command, never a FAIL of the gold."""
    monkeypatch.setattr(validate, "TRAINER_REQUIREMENTS", {"torchtitan": ("json", "no_such_module_here")})
    assert validate.requirements_missing("torchtitan") == (
        "torchtitan's requirements are not installed in this Python (no_such_module_here): "
        "pip install -e '.[torchtitan]'"
    )
    assert validate.requirements_missing("pithtrain") == ""
    task = TaskSpec("feature-01", "feature", "t", 1.0, ("torchtitan",), "edit", dir=tmp_path, profiles=("smoke",))
    cells = validate.validate_row(task, "torchtitan", "smoke", {"feature-01": task}, None, 0)
    assert cells and {c.verdict for c in cells} == {"not run"}
    assert all("no_such_module_here" in c.reasons[0] for c in cells)
