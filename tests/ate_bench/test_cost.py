"""`cost`: the agent-free floor of a Q&A task, on a hand-made import graph and on the toy key tasks."""

import json
import subprocess
from pathlib import Path

from ate_bench.__main__ import main
from ate_bench.cost import cost_row, hops_from, import_graph, workspace_files
from ate_bench.frameworks import FRAMEWORKS
from ate_bench.tasks import TaskSpec
from ate_bench.workspace import REPO_ROOT

TOY_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "tasks"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_import_hops_follow_every_import_form(tmp_path):
    root = _tree(
        tmp_path,
        {
            "train.py": "import fw.run\n",
            "fw/__init__.py": "",
            "fw/run.py": "from . import model\nfrom .parallel.mesh import build\n",
            "fw/model.py": "def f():\n    from fw.ops import attn  # a lazy import is an import too\n",
            "fw/ops/__init__.py": "",
            "fw/ops/attn.py": "",
            "fw/parallel/__init__.py": "from ..ops import attn\n",
            "fw/parallel/mesh.py": "build = 1\n",
            "fw/orphan.py": "import fw.model\n",
            "fw/broken.py": "def (:\n",
        },
    )
    graph, unparsed = import_graph(root, workspace_files(root))
    assert unparsed == ["fw/broken.py"]
    hops = hops_from("train.py", graph)
    # train -> fw/run (1; fw/__init__ too) -> fw/model, fw/parallel/mesh (2, via fw/parallel/__init__)
    # -> fw/ops/attn (3, from model's lazy import or the parallel package's relative import).
    assert hops == {
        "train.py": 0,
        "fw/__init__.py": 1,
        "fw/run.py": 1,
        "fw/model.py": 2,
        "fw/parallel/__init__.py": 2,
        "fw/parallel/mesh.py": 2,
        "fw/ops/__init__.py": 3,
        "fw/ops/attn.py": 3,
    }
    assert "fw/orphan.py" not in hops  # nothing imports it: unreachable


def test_entry_points_are_data_per_source_mode():
    assert FRAMEWORKS["pithtrain"].entry_for("repo") == "pithtrain/__main__.py"
    assert FRAMEWORKS["torchtitan"].entry_for("pypi") == "torchtitan/train.py"
    assert FRAMEWORKS["megatron-lm"].entry_for("git") == "pretrain_gpt.py"
    assert FRAMEWORKS["megatron-lm"].entry_for("pypi") == "megatron/training/training.py"


def test_cost_of_the_toy_tasks(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--tasks-dir", str(TOY_TASKS), "cost", "--tasks", "qa-0[23]", "--frameworks", "pithtrain"]
    assert main([*argv, "--out", str(out), "--work-root", str(tmp_path / "work")]) == 0
    (path,) = out.glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["schema"] == "ate-bench-cost-1" and len(rec["workspaces"]["pithtrain"]["tree_sha256"]) == 64
    assert rec["workspaces"]["pithtrain"]["entry_point"] == "pithtrain/__main__.py"
    rows = {r["task"]: r for r in rec["rows"]}
    pyproject = subprocess.run(["git", "show", "HEAD:pyproject.toml"], cwd=REPO_ROOT, capture_output=True).stdout
    cli = {e["path"]: e for e in rows["qa-02"]["cited"]}
    assert sorted(cli) == ["pithtrain/__main__.py", "pyproject.toml"]  # the glob pyproject.* matched one file
    assert cli["pyproject.toml"]["bytes"] == len(pyproject)
    assert cli["pyproject.toml"]["lines"] == pyproject.count(b"\n")
    assert (cli["pyproject.toml"]["hops"], cli["pyproject.toml"]["reach"]) == (None, "not-python")
    assert (cli["pithtrain/__main__.py"]["hops"], cli["pithtrain/__main__.py"]["reach"]) == (0, "entry-point")
    assert rows["qa-02"]["cited_bytes"] == sum(e["bytes"] for e in cli.values())
    # The term's files, counted by hand over the same tree: git's own listing of HEAD.
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
    excluded = FRAMEWORKS["pithtrain"].exclude
    shipped = [f for f in listed if not any(f == x or f.startswith(x + "/") for x in excluded)]
    sources = [f for f in shipped if f.endswith((".py", ".toml", ".sh", ".yaml", ".yml"))]
    show = lambda f: subprocess.run(["git", "show", f"HEAD:{f}"], cwd=REPO_ROOT, capture_output=True).stdout  # noqa: E731
    n_term = sum(b"requires-python" in show(f).lower() or b"version" in show(f).lower() for f in sources)
    assert rows["qa-03"]["term_files"] == n_term
    assert "pithtrain/__main__.py: 0, pyproject.toml: not-python" in capsys.readouterr().out


def test_cost_needs_a_key(tmp_path, capsys):
    argv = ["--tasks-dir", str(TOY_TASKS), "cost", "--tasks", "qa-01", "--out", str(tmp_path / "out")]
    assert main([*argv, "--work-root", str(tmp_path / "work")]) == 2
    assert "toy-version: no key.toml (cost reads the Q&A answer key)" in capsys.readouterr().err


def test_a_glob_fact_counts_its_nearest_file_once(tmp_path):
    root = _tree(
        tmp_path / "ws",
        {
            "train.py": "import fw.a\n",
            "fw/__init__.py": "",
            "fw/a.py": "x = 1\n" * 10,
            "fw/b.py": "x = 1\n",  # shorter, but nothing imports it
            "fw/c.py": "import fw.a\n",
        },
    )
    key = tmp_path / "task" / "key.toml"
    key.parent.mkdir()
    key.write_text(
        "[pithtrain]\nterm = 'x = 1'\n"
        '[pithtrain.f1]\nwhat = "w"\nat = [ { file = "fw/[ab].py", pattern = "x" } ]\n'
        '[pithtrain.f2]\nwhat = "w"\n'
        'at = [ { file = "fw/none.py", pattern = "x" }, { file = "fw/a.py", pattern = "x" } ]\n'
        '[pithtrain.f3]\nwhat = "w"\nat = [ { file = "fw/none.py", pattern = "x" } ]\n'
        '[pithtrain.choice]\nwhat = "w"\naccept = ["a"]\n'
    )
    task = TaskSpec(
        id="qa-01",
        category="qa",
        title="t",
        time_limit_min=1,
        frameworks=("pithtrain",),
        tools="read-only",
        dir=key.parent,
    )
    files = workspace_files(root)
    graph, _ = import_graph(root, files)
    row = cost_row(task, "pithtrain", root, files, hops_from("train.py", graph))
    assert row["cited"] == [
        {"path": "fw/a.py", "facts": ["f1", "f2"], "lines": 10, "bytes": 60, "hops": 1, "reach": "imported"}
    ]
    assert row["glob_matches"] == {"f1": 2, "f2": 1, "f3": 0}
    assert row["unmatched_facts"] == ["f3: no file matches fw/none.py"]
    assert (row["term_files"], row["source_files"]) == (2, 5)
