"""The shared Q&A checker (tasks/qa/qa_check.py) and gold renderer (tasks/qa/render.py) on tiny workspaces."""

import importlib.util
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

QA_DIR = Path(__file__).resolve().parent.parent / "tasks" / "qa"
sys.path.insert(0, str(QA_DIR))
import qa_check  # noqa: E402

_spec = importlib.util.spec_from_file_location("qa_render", QA_DIR / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

# mesh.py: line 1 docstring, 5 the mechanism, 30 a second fact; 60 lines in all.
MESH = ['"""Mesh."""', "import torch", "", "def setup():", "    mesh = init_device_mesh('cuda', (2, 2))"]
MESH += [f"# filler {i}" for i in range(6, 30)] + ["    ep_group = mesh['ep'].get_group()"]
MESH += [f"# filler {i}" for i in range(31, 61)]

KEY = """
[pithtrain]
term = 'init_device_mesh'
[[pithtrain.facts]]
name = "mesh-call"
what = "the init_device_mesh call"
file = "pkg/mesh.py"
pattern = 'init_device_mesh\\('
mechanism = true
words = ["pp"]
[[pithtrain.facts]]
name = "ep-group"
what = "the ep group"
file = "pkg/*.py"
pattern = "ep_group ="
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "pkg").mkdir(parents=True)
    (tmp_path / "ws" / "pkg" / "mesh.py").write_text("\n".join(MESH) + "\n")
    (tmp_path / "key.toml").write_text(KEY)
    return tmp_path / "ws"


def verdict(ws: Path, body: str | None, prose: str = "The mesh has pp and ep axes.") -> list[str]:
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    message = "Some exploration notes pkg/none.py:99\n"
    if body is not None:
        message += f"<final-answer>\n{prose}\n{body}\n</final-answer>\n"
    return qa_check.check(key, ws, message)


def test_gold_passes_with_slack_and_path_spellings(ws):
    assert verdict(ws, "See `pkg/mesh.py:5` and ./pkg/mesh.py:29-33.") == []
    assert verdict(ws, f"See {ws}/pkg/mesh.py:2 and pkg/mesh.py:27.") == []  # 3 lines of slack both ways


def test_slack_is_three_lines(ws):
    fails = verdict(ws, "pkg/mesh.py:5 and pkg/mesh.py:34-36")  # line 30 is 4 lines before 34
    assert len(fails) == 1 and fails[0].startswith("FAIL: ep-group: no cited range")


def test_fabricated_citation_fails_even_when_facts_hold(ws):
    for bad in ["pkg/mesh.py:61", "pkg/mesh.py:0", "pkg/mesh.py:10-9", "pkg/other.py:1", "../key.toml:1"]:
        fails = verdict(ws, f"pkg/mesh.py:5 pkg/mesh.py:30 {bad}")
        assert fails == [f"FAIL: citation {bad} does not exist (fabricated)"], bad


def test_span_over_40_lines_establishes_nothing(ws):
    fails = verdict(ws, "pkg/mesh.py:1-41")
    assert [f.split(":")[1].strip() for f in fails] == ["mesh-call", "ep-group"]
    assert "over 40 lines" in fails[0]
    assert verdict(ws, "pkg/mesh.py:1-40") == []  # exactly 40 covers both


def test_missing_words_fail(ws):
    fails = verdict(ws, "pkg/mesh.py:5 pkg/mesh.py:30", prose="The mesh has two axes; dp is one (apply).")
    assert fails == ["FAIL: mesh-call: the final answer does not use the word(s) pp"]
    assert verdict(ws, "pkg/mesh.py:5 pkg/mesh.py:30", prose="Axes: PP_size.") == []


def test_only_the_block_counts(ws):
    assert verdict(ws, None) == [
        "FAIL: no <final-answer> block (a line <final-answer>, the answer, a line </final-answer>)"
    ]
    fails = verdict(ws, "no citations here")
    assert [f.split(":")[1].strip() for f in fails] == ["mesh-call", "ep-group"]
    assert "no citation of pkg/mesh.py" in fails[0]


def test_glob_file_matches_any_file_it_names(ws):
    (ws / "pkg" / "groups.py").write_text("x = 1\nep_group = None\n")
    assert verdict(ws, "pkg/mesh.py:5 pkg/groups.py:2") == []
    assert verdict(ws, "pkg/mesh.py:5 pkg/groups.py:1") == []  # slack reaches line 2
    assert verdict(ws, "pkg/mesh.py:5 pkg/mesh.py:10")[0].startswith("FAIL: ep-group")


@pytest.mark.parametrize(
    "message",
    [
        "",
        "<final-answer>",
        "<final-answer>\n</final-answer>",
        "<final-answer>\n" + "a.py:99999999999999999999-1 " + "x" * 5000 + ".py:1\n</final-answer>",
        "<final-answer>\n/etc/passwd:1 pkg:1 pkg/mesh.py:1-99999 \x00\xff.py:3 pkg/mesh.py/x.py:1\n</final-answer>",
        "<final-answer>\n" + "a." * 200_000 + "\n</final-answer>",  # quadratic for the plain regex
    ],
)
def test_a_bad_answer_never_crashes(ws, tmp_path, message, capsys):
    answer = tmp_path / "answer.md"
    answer.write_text(message, errors="surrogateescape")
    argv = ["--workspace", str(ws), "--framework", "pithtrain", "--answer", str(answer)]
    assert qa_check.main(ws.parent / "key.toml", argv) == 1
    assert all(line.startswith("FAIL: ") for line in capsys.readouterr().out.splitlines())


def test_find_citations_matches_the_convention_regex():
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice("ab.:-/1 2`") for _ in range(rng.randint(0, 40)))
        want = [(m["path"], m["start"], m["end"]) for m in qa_check.CITATION.finditer(text)]
        assert qa_check.find_citations(text) == want, text


def test_main_pass_and_broken_key(ws, tmp_path, capsys):
    answer = tmp_path / "answer.md"
    answer.write_text("<final-answer>\npp: pkg/mesh.py:5, pkg/mesh.py:30\n</final-answer>\n")
    argv = ["--workspace", str(ws), "--framework", "pithtrain", "--answer", str(answer)]
    assert qa_check.main(ws.parent / "key.toml", argv) == 0
    assert capsys.readouterr().out == "PASS\n"
    bad_key = tmp_path / "bad.toml"
    for text, says in [
        (KEY.replace("mechanism = true", ""), "mechanism = true"),
        (KEY.replace("[pithtrain]", "[titan]").replace("pithtrain.facts", "titan.facts"), "no table [pithtrain]"),
        (KEY.replace("'init_device_mesh\\('", "'init_device_mesh('"), "not a valid regex"),
    ]:
        bad_key.write_text(text)
        assert qa_check.main(bad_key, argv) == 2
        assert says in capsys.readouterr().err


def test_render_resolves_anchors(ws):
    text = "Built at [[pkg/mesh.py#init_device_mesh]], groups [[pkg/mesh.py#^def setup..ep_group]]."
    assert render.render(text, ws) == "Built at pkg/mesh.py:5, groups pkg/mesh.py:4-30."
    assert render.render("[[pkg/mesh.py#filler 7..filler]]", ws) == "pkg/mesh.py:7-7"  # N2 may equal N1
    assert render.render(r"[[pkg/mesh.py#mesh\['ep'\]]]", ws) == "pkg/mesh.py:30"  # an escaped ] before ]]


def run_render(answer: Path, ws: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(QA_DIR / "render.py"), str(answer)]
    return subprocess.run(argv, cwd=ws, capture_output=True, text=True)


def test_render_missing_anchor_exits_1_naming_it(ws, tmp_path):
    answer = tmp_path / "answer.md"
    answer.write_text("[[pkg/mesh.py#no_such_symbol]] and [[pkg/gone.py#x]] and [[pkg/mesh.py#setup]]\n")
    done = subprocess.run(
        [sys.executable, str(QA_DIR / "render.py"), str(answer)], cwd=ws, capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "[[pkg/mesh.py#no_such_symbol]]" in done.stderr and "[[pkg/gone.py#x]]" in done.stderr
    answer.write_text("[[pkg/mesh.py#setup]]\n")
    done = subprocess.run(
        [sys.executable, str(QA_DIR / "render.py"), str(answer)], cwd=ws, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, "pkg/mesh.py:4\n")


@pytest.mark.parametrize("key_path", sorted(QA_DIR.glob("*/key.toml")), ids=lambda p: p.parent.name)
def test_every_task_key_loads_for_its_frameworks(key_path):
    import tomllib

    frameworks = tomllib.loads((key_path.parent / "task.toml").read_text())["frameworks"]
    for fw in frameworks:
        key = qa_check.load_key(key_path, fw)
        assert any(f.mechanism for f in key.facts) and len(key.facts) >= 2


def _shift(m: re.Match) -> str:
    end = f"-{int(m['end']) + 40}" if m["end"] else ""
    return f"{m['path']}:{int(m['start']) + 40}{end}"


@pytest.mark.parametrize(
    "task", sorted(p.parent.parent.parent for p in QA_DIR.glob("*/gold/pithtrain/answer.md")), ids=lambda p: p.name
)
def test_pithtrain_gold_follows_the_code(task):
    """Each task's pithtrain gold, rendered against this checkout, passes its key; shifted, stripped and the
    hand-written wrong answers fail. (The workspace is this tree minus ate_bench/tasks/results, which no gold cites.)"""
    root = QA_DIR.parent.parent
    key = qa_check.load_key(task / "key.toml", "pithtrain")
    gold = render.render((task / "gold" / "pithtrain" / "answer.md").read_text(), root)
    assert qa_check.check(key, root, gold) == []
    assert qa_check.check(key, root, qa_check.CITATION.sub(_shift, gold))
    assert qa_check.check(key, root, qa_check.CITATION.sub(lambda m: m["path"], gold))
    for wrong in sorted((task / "wrong" / "pithtrain").glob("*.md")):
        assert qa_check.check(key, root, wrong.read_text()), wrong.name


def test_no_pithtrain_gold_answers_another_question():
    """A key strong enough to tell its question from the others: every other task's pithtrain gold fails it
    (validate's generated other-task case tries only the next task; this tries them all, in-process)."""
    root = QA_DIR.parent.parent
    tasks = sorted(p.parent.parent.parent for p in QA_DIR.glob("*/gold/pithtrain/answer.md"))
    golds = {t: render.render((t / "gold" / "pithtrain" / "answer.md").read_text(), root) for t in tasks}
    passing = [
        f"{other.name} passes {task.name}"
        for task in tasks
        for other in tasks
        if other != task and not qa_check.check(qa_check.load_key(task / "key.toml", "pithtrain"), root, golds[other])
    ]
    assert not passing, passing
