"""The shared Q&A checker (tasks/qa/qa_check.py) and gold renderer (tasks/qa/render.py) on tiny workspaces."""

import fnmatch
import importlib.util
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

QA_DIR = Path(__file__).resolve().parents[2] / "tasks" / "qa"
sys.path.insert(0, str(QA_DIR))
import qa_check  # noqa: E402

CITATION = re.compile(r"(?P<path>[A-Za-z0-9_./-]+\.[A-Za-z0-9_]+):(?P<start>\d+)(?:-(?P<end>\d+))?")
"""The convention's citation regex; qa_check.find_citations finds its matches in linear time."""

_spec = importlib.util.spec_from_file_location("qa_render", QA_DIR / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

# pkg/mesh.py: line 5 the mesh call, 30 a group; 60 lines in all. pkg/models/a.py and b.py: a family each.
MESH = ['"""Mesh."""', "import torch", "", "def setup():", "    mesh = init_device_mesh('cuda', (2, 2))"]
MESH += [f"# filler {i}" for i in range(6, 30)] + ["    ep_group = mesh['ep'].get_group()"]
MESH += [f"# filler {i}" for i in range(31, 61)]

INSTRUCTION = """**Question.** ...

**Slots.** A citation slot takes ...
- `create-call` (citation): the call that creates the mesh.
- `group-lookup` (citation): where a group is taken.
- `pairs` (choice: `halves` | `interleaved`): the layout.
- `dims` (choice: `dp` | `cp` | `ep`): the dimensions (list every one that applies, comma-separated).
"""

KEY = """
[pithtrain]
term = 'init_device_mesh'

[pithtrain.create-call]
what = "the init_device_mesh call"
at = [ { file = "pkg/mesh.py", pattern = 'init_device_mesh\\(' } ]

[pithtrain.group-lookup]
what = "the ep group"
at = [ { file = "pkg/*.py", pattern = "ep_group =" } ]
absent = "no"

[pithtrain.pairs]
what = "halves in a, interleaved in b"
accept = ["halves"]
accept_by_file = { "pkg/models/b.py" = ["interleaved"] }

[pithtrain.dims]
what = "dp and ep"
accept = ["dp, ep"]
"""

RIGHT = "create-call: pkg/mesh.py:5\ngroup-lookup: pkg/mesh.py:30\npairs: halves\ndims: ep, dp"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "pkg" / "models").mkdir(parents=True)
    (tmp_path / "ws" / "pkg" / "mesh.py").write_text("\n".join(MESH) + "\n")
    (tmp_path / "ws" / "pkg" / "models" / "a.py").write_text("rope_cos_sin_F = 1\n")
    (tmp_path / "ws" / "pkg" / "models" / "b.py").write_text("x = 1\n")
    (tmp_path / "key.toml").write_text(KEY)
    (tmp_path / "instruction.md").write_text(INSTRUCTION)
    return tmp_path / "ws"


def verdict(ws: Path, slots: str | None, prose: str = "The mesh has `ep_group` (see pkg/none.py:99).") -> list[str]:
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    message = "Some exploration notes pkg/none.py:99\n"
    if slots is not None:
        message += f"<final-answer>\n{prose}\n{slots}\n</final-answer>\n"
    return qa_check.check(key, ws, message, "pithtrain")[0]


def test_right_slots_pass_with_slack_and_path_spellings(ws):
    assert verdict(ws, RIGHT) == []
    spelled = RIGHT.replace("pkg/mesh.py:5", "`./pkg/mesh.py:2`").replace("pkg/mesh.py:30", f"{ws}/pkg/mesh.py:27-33")
    assert verdict(ws, "- " + spelled.replace("\n", "\n- ")) == []  # bullets, 3 lines of slack both ways
    assert verdict(ws, RIGHT.replace("pkg/mesh.py:30", "pkg/mesh.py:34"))[0].startswith("FAIL: group-lookup: ")


def test_paths_resolve_by_package_and_suffix_and_say_which_rule(ws):
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    (ws / "pithtrain" / "deep").mkdir(parents=True)
    (ws / "pithtrain" / "deep" / "only.py").write_text("    mesh = init_device_mesh('cuda')\n")
    (ws / "pithtrain" / "twin.py").write_text("a\n")
    (ws / "pithtrain" / "deep" / "twin.py").write_text("a\n")
    msg = "<final-answer>\nSee deep/only.py:1, only.py:1, twin.py:1.\n" + RIGHT.replace("pkg/mesh.py:30", "mesh.py:30")
    fails, notes = qa_check.check(key, ws, msg + "\n</final-answer>\n", "pithtrain")
    assert fails == []
    assert notes == [
        "resolved: deep/only.py -> pithtrain/deep/only.py (rule: package)",
        "resolved: only.py -> pithtrain/deep/only.py (rule: suffix)",
        "resolved: twin.py -> pithtrain/twin.py (rule: package)",
        "resolved: mesh.py -> pkg/mesh.py (rule: suffix)",
    ]
    for twin in ("a", "b"):
        (ws / twin / "x").mkdir(parents=True)
        (ws / twin / "x" / "mesh.py").write_text("\n".join(MESH) + "\n")
    fails = verdict(ws, RIGHT.replace("pkg/mesh.py:5", "x/mesh.py:5"))
    assert fails == [
        "FAIL: create-call: citation x/mesh.py:5 is fabricated: a suffix of 2 files, 2 of them equally shallow"
        " (a/x/mesh.py, b/x/mesh.py)"
    ]
    (ws / "a" / "x" / "other.py").write_text("a\n")  # a citation beside one of the twins breaks the tie
    msg = "<final-answer>\nSee a/x/other.py:1.\n" + RIGHT.replace("pkg/mesh.py:5", "x/mesh.py:5")
    fails, notes = qa_check.check(key, ws, msg + "\n</final-answer>\n", "pithtrain")
    assert fails[0].startswith("FAIL: create-call: x/mesh.py:5 (a/x/mesh.py) is not where")  # resolved, not fabricated
    assert "resolved: x/mesh.py -> a/x/mesh.py (rule: suffix-beside)" in notes


def test_a_region_may_narrow_its_slack(ws):
    assert verdict(ws, RIGHT.replace("pkg/mesh.py:30", "pkg/mesh.py:32")) == []
    (ws.parent / "key.toml").write_text(KEY.replace('pattern = "ep_group =" }', 'pattern = "ep_group =", slack = 1 }'))
    assert verdict(ws, RIGHT.replace("pkg/mesh.py:30", "pkg/mesh.py:31")) == []
    assert verdict(ws, RIGHT.replace("pkg/mesh.py:30", "pkg/mesh.py:32"))[0].startswith("FAIL: group-lookup: ")


def test_every_citation_of_a_slot_must_land(ws):
    fails = verdict(ws, RIGHT.replace("pkg/mesh.py:5", "pkg/mesh.py:15, pkg/mesh.py:5"))
    assert fails == [
        "FAIL: create-call: pkg/mesh.py:15 (pkg/mesh.py) is not where this happens (wanted: the init_device_mesh call)"
    ]
    fails = verdict(ws, RIGHT.replace("pkg/mesh.py:5", "pkg/mesh.py:5, pkg/mesh.py:5, pkg/mesh.py:4"))
    assert fails == ["FAIL: create-call: 3 citations; a citation slot takes one or two"]
    assert "over 40 lines" in verdict(ws, RIGHT.replace("pkg/mesh.py:5", "pkg/mesh.py:1-41"))[0]


def test_fabricated_slot_citations_fail_and_explanation_ones_are_notes(ws):
    for bad in ["pkg/mesh.py:61", "pkg/mesh.py:0", "pkg/mesh.py:10-9", "pkg/other.py:1", "../key.toml:1"]:
        fails = verdict(ws, RIGHT.replace("pkg/mesh.py:5", bad))
        assert len(fails) == 1 and fails[0].startswith(f"FAIL: create-call: citation {bad} is fabricated"), bad
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    msg = f"<final-answer>\nWhy (pkg/gone.py:3).\n{RIGHT}\n</final-answer>\n"
    fails, notes = qa_check.check(key, ws, msg, "pithtrain")
    assert fails == [] and notes[0].startswith("note: citation pkg/gone.py:3 does not resolve")


def test_absent_is_right_only_where_the_key_says(ws):
    fails = verdict(ws, RIGHT.replace("group-lookup: pkg/mesh.py:30", "group-lookup: absent, pkg/mesh.py:30"))
    assert fails == ["FAIL: group-lookup: says absent, but the framework has it (the ep group)"]
    (ws.parent / "key.toml").write_text(KEY.replace('absent = "no"', 'absent = "yes"'))
    assert verdict(ws, RIGHT.replace("group-lookup: pkg/mesh.py:30", "group-lookup: absent, pkg/mesh.py:30")) == []
    assert "wanted absent" in verdict(ws, RIGHT)[0]
    (ws.parent / "key.toml").write_text(KEY.replace('absent = "no"', 'absent = "either"'))
    assert verdict(ws, RIGHT) == []
    assert verdict(ws, RIGHT.replace("group-lookup: pkg/mesh.py:30", "group-lookup: absent, pkg/mesh.py:31")) == []


def test_choices_listed_wrong_by_family_and_lists(ws):
    assert verdict(ws, RIGHT.replace("pairs: halves", "pairs: `Halves` (chunk)")) == []
    assert verdict(ws, RIGHT.replace("pairs: halves", "pairs: interleaved")) == [
        "FAIL: pairs: interleaved is wrong (wanted: halves in a, interleaved in b)"
    ]
    assert verdict(ws, RIGHT.replace("pairs: halves", "pairs: rotated"))[0].startswith(
        "FAIL: pairs: 'rotated' is not a choice the instruction lists"
    )
    fam_b = RIGHT.replace("group-lookup: pkg/mesh.py:30", "group-lookup: pkg/mesh.py:30, pkg/models/b.py:1")
    (ws / "pkg" / "models" / "b.py").write_text("ep_group = 1\n")
    assert verdict(ws, fam_b.replace("pairs: halves", "pairs: interleaved")) == []
    assert "wrong for pkg/models/b.py" in verdict(ws, fam_b)[0]
    assert verdict(ws, RIGHT.replace("dims: ep, dp", "dims: DP and EP (the batch)")) == []
    assert verdict(ws, RIGHT.replace("dims: ep, dp", "dims: dp"))[0].startswith("FAIL: dims: dp is wrong")
    assert verdict(ws, RIGHT.replace("dims: ep, dp", "dims: dp,ep,tp"))[0].startswith("FAIL: dims: 'dp,ep,tp' is not")


def test_an_optional_path_lands_only_for_an_answer_that_names_it(ws):
    # The mesh call at line 5 is the default's; the group at line 30 only an option's, which also flips `pairs`.
    key = (ws.parent / "key.toml").read_text()
    key = key.replace('pattern = "ep_group =" }', 'pattern = "ep_group =", path = "--ep-groups" }')
    key = key.replace(
        'accept = ["halves"]', 'accept = ["halves"]\naccept_by_path = { "--ep-groups" = ["interleaved"] }'
    )
    (ws.parent / "key.toml").write_text(key)
    named = RIGHT.replace("pairs: halves", "pairs: interleaved")
    assert verdict(ws, named + "\npath: `--ep-groups on`") == []
    as_default = ["FAIL: group-lookup: pkg/mesh.py:30 (pkg/mesh.py) is not where this happens (wanted: the ep group)"]
    as_default.append("FAIL: pairs: interleaved is wrong (wanted: halves in a, interleaved in b)")
    assert verdict(ws, named) == as_default  # the option presented as the default
    assert verdict(ws, named + "\npath: default (the option is off)") == as_default
    assert verdict(ws, named + "\npath: --other-flag") == as_default
    # the default's regions land for an answer on any path; every path line counts, `default` lines add nothing
    assert verdict(ws, named + "\npath: --other-flag\npath: --ep-groups") == []
    assert verdict(ws, named + "\npath: --ep-groups\npath: --other-flag") == []
    assert verdict(ws, named + "\npath: --ep-groups\npath: default") == []
    assert verdict(ws, named + "\npath: default\npath: default") == as_default
    assert verdict(ws, "path: --ep-groups\n" + RIGHT)[0].startswith("FAIL: pairs: halves is wrong")
    # absent_by_path: with the option there is no mesh call, so `absent` (the evidence landing) is right only then
    anchor = "pattern = 'init_device_mesh\\(' } ]"
    assert anchor in KEY
    (ws.parent / "key.toml").write_text(KEY.replace(anchor, anchor + '\nabsent_by_path = { "--no-mesh" = "yes" }'))
    absent = RIGHT.replace("create-call: pkg/mesh.py:5", "create-call: absent, pkg/mesh.py:5")
    assert verdict(ws, absent + "\npath: --no-mesh") == []
    assert verdict(ws, absent)[0].startswith("FAIL: create-call: says absent, but the framework has it")
    assert "the framework lacks it" in verdict(ws, RIGHT + "\npath: --no-mesh")[0]
    (ws.parent / "key.toml").write_text(key.replace('path = "--ep-groups"', "path = 3"))
    with pytest.raises(qa_check.KeyFormatError, match="at\\[0\\].path = 3"):
        qa_check.load_key(ws.parent / "key.toml", "pithtrain")


def test_a_slot_added_later_is_asked_only_of_answers_written_after_it(ws):
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    assert {s.doc.name: s.since_freeze for s in key.slots}["dims"] == 0
    (ws.parent / "key.toml").write_text("since_freeze = { dims = 13 }\n" + KEY)
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    without = "<final-answer>\n" + RIGHT.replace("\ndims: ep, dp", "") + "\n</final-answer>\n"
    missing = ["FAIL: dims: missing (a line `dims: ...` in the final block)"]
    assert qa_check.check(key, ws, without, "pithtrain")[0] == missing  # an agent's answer: the current instruction
    assert qa_check.check(key, ws, without, "pithtrain", written_at_freeze=13)[0] == missing
    assert qa_check.check(key, ws, without, "pithtrain", written_at_freeze=12)[0] == []  # a blind set of freeze 12
    wrong = without.replace("pairs: halves", "pairs: interleaved")  # the slots it was written for are still scored
    assert qa_check.check(key, ws, wrong, "pithtrain", written_at_freeze=12)[0][0].startswith("FAIL: pairs:")
    for bad, says in [("{ dims = 0 }", "FREEZE > 0"), ("{ nope = 13 }", "not slots")]:
        (ws.parent / "key.toml").write_text(f"since_freeze = {bad}\n" + KEY)
        with pytest.raises(qa_check.KeyFormatError, match=says):
            qa_check.load_key(ws.parent / "key.toml", "pithtrain")


def test_a_name_kept_only_by_an_experiment_of_older_names_is_another_versions(ws):
    # torchtitan's TorchComms experiment keeps the old ParallelDims' mesh names: named as the tree's, they FAIL
    key = qa_check.load_key(ws.parent / "key.toml", "pithtrain")
    old = ws / "torchtitan" / "experiments" / "torchcomms" / "parallel_dims.py"
    old.parent.mkdir(parents=True)
    old.write_text('names = ["dp_shard_mod_ep"]\n')
    msg = "<final-answer>\nExperts shard over `dp_shard_mod_ep`{}.\n" + RIGHT + "\n</final-answer>\n"
    fails = qa_check.check(key, ws, msg.format(""), "torchtitan")[0]
    assert fails == [
        "FAIL: names `dp_shard_mod_ep`, which no file of the workspace but"
        " torchtitan/experiments/torchcomms/parallel_dims.py (older names) contains (another version's or invented)"
    ]
    assert qa_check.check(key, ws, msg.format(" (the torchcomms experiment's mesh)"), "torchtitan")[0] == []
    assert qa_check.check(key, ws, msg.format(""), "pithtrain")[0] == []  # only torchtitan has such an experiment


def test_missing_unknown_and_repeated_slots(ws):
    assert verdict(ws, None) == [
        "FAIL: no <final-answer> block (a line <final-answer>, the answer, a line </final-answer>)"
    ]
    assert verdict(ws, RIGHT.replace("pairs: halves\n", "")) == [
        "FAIL: pairs: missing (a line `pairs: ...` in the final block)"
    ]
    assert verdict(ws, RIGHT + "\nmesh-order: pkg/mesh.py:5\nnote: prose") == [
        "FAIL: mesh-order: not a slot of this question"
    ]
    assert verdict(ws, RIGHT, prose="- all-reduce: the collective.\nThen the slots:") == []  # prose, not a slot
    assert verdict(ws, "pairs: interleaved\n" + RIGHT) == []  # the last line naming a slot is its value
    numbered = "\n".join(f"{i}. **{line.replace(':', ':**', 1)}" for i, line in enumerate(RIGHT.splitlines(), 1))
    assert verdict(ws, numbered) == []


def test_backticked_names_must_be_in_the_tree(ws):
    assert verdict(ws, RIGHT, prose="Built by `init_device_mesh`; the tables by `rope_cos_sin` (`x.y`).") == []
    fails = verdict(ws, RIGHT, prose="Built by `build_mesh_v2()` with `DeviceMeshBuilder`; `RMS` is short.")
    assert fails == [
        "FAIL: names `build_mesh_v2`, which no file of the workspace contains (another version's or invented)",
        "FAIL: names `DeviceMeshBuilder`, which no file of the workspace contains (another version's or invented)",
    ]
    said_absent = "There is no `build_mesh_v2`, not an `attn_impl`-style switch; `DeviceMeshBuilder` does not exist."
    assert verdict(ws, RIGHT, prose=said_absent) == []
    assert verdict(ws, RIGHT, prose="It uses `build_mesh_v2`, not a ring.")[0].startswith("FAIL: names `build_mesh_v2`")


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
    assert all(line.startswith(("FAIL: ", "note: ", "resolved: ")) for line in capsys.readouterr().out.splitlines())


def test_find_citations_matches_the_convention_regex():
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice("ab.:-/1 2`") for _ in range(rng.randint(0, 40)))
        want = [(m["path"], m["start"], m["end"]) for m in CITATION.finditer(text)]
        assert qa_check.find_citations(text) == want, text


def test_main_pass_and_broken_key(ws, tmp_path, capsys):
    answer = tmp_path / "answer.md"
    answer.write_text(f"<final-answer>\n{RIGHT}\n</final-answer>\n")
    argv = ["--workspace", str(ws), "--framework", "pithtrain", "--answer", str(answer)]
    assert qa_check.main(ws.parent / "key.toml", argv) == 0
    assert capsys.readouterr().out == "PASS\n"
    bad_key = tmp_path / "bad.toml"
    for text, says in [
        (KEY.replace("[pithtrain.dims]", "[pithtrain.dim]"), "unknown keys ['dim']"),
        (KEY.replace("[pithtrain]", "[titan]").replace("pithtrain.", "titan."), "no table [pithtrain]"),
        (KEY.replace("'init_device_mesh\\('", "'init_device_mesh('"), "not a valid regex"),
        (KEY.replace('accept = ["halves"]', 'accept = ["rotated"]'), "accept value 'rotated' is not one of"),
        (KEY.replace('absent = "no"', 'absent = "maybe"'), "absent = 'maybe'"),
        (KEY.replace('"ep_group =" }', '"ep_group =", slack = 5 }'), "slack = 5; need an integer 0..3"),
        (KEY.replace('at = [ { file = "pkg/*.py", pattern = "ep_group =" } ]', "at = []"), "at = []"),
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
        assert {s.doc.name for s in key.slots} == {
            d.name for d in qa_check.read_slot_docs(key_path.with_name("instruction.md"))
        }


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
    assert qa_check.check(key, root, gold, "pithtrain")[0] == []
    assert qa_check.check(key, root, CITATION.sub(_shift, gold), "pithtrain")[0]
    assert qa_check.check(key, root, CITATION.sub(lambda m: m["path"], gold), "pithtrain")[0]
    for wrong in sorted((task / "wrong" / "pithtrain").glob("*.md")):
        assert qa_check.check(key, root, wrong.read_text(), "pithtrain")[0], wrong.name


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
        if other != task
        and not qa_check.check(qa_check.load_key(task / "key.toml", "pithtrain"), root, golds[other], "pithtrain")[0]
    ]
    assert not passing, passing


def _alternatives(pattern: str) -> list[str]:
    """The top-level `|` alternatives of a regex (outside groups and classes)."""
    out, depth, cur, i = [], 0, "", 0
    while i < len(pattern):
        ch = pattern[i]
        step = 2 if ch == "\\" else 1
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "|" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += pattern[i : i + step]
        i += step
    return [*out, cur]


def _tree_files(root: Path) -> list[str]:
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        files += [(Path(d) / f).relative_to(root).as_posix() for f in names]
    return files


def _dead_regions(framework: str, root: Path) -> list[str]:
    """Every key region whose file glob, or one of whose pattern's alternatives, matches nothing in `root`."""
    files = _tree_files(root)
    dead = []
    for key_path in sorted(QA_DIR.glob("*/key.toml")):
        for slot in qa_check.load_key(key_path, framework).slots:
            for r in slot.at:
                lines = [line for f in fnmatch.filter(files, r.file) for line in qa_check.read_lines(root / f)]
                for alt in _alternatives(r.pattern.pattern):
                    if not any(re.search(alt, line) for line in lines):
                        dead.append(f"{key_path.parent.name} {slot.doc.name}: {r.file} /{alt}/")
    return dead


def test_every_pithtrain_key_region_matches_this_tree():
    """A region that matches nothing is a typo or a line that moved: it would silently accept nothing."""
    assert _dead_regions("pithtrain", QA_DIR.parent.parent) == []


@pytest.mark.parametrize("framework", ["torchtitan", "megatron-lm"])
def test_every_pinned_key_region_matches_its_tree(framework, tmp_path):
    from ate_bench.frameworks import FRAMEWORKS
    from ate_bench.workspace import DEFAULT_CACHE_DIR, materialize

    if not (DEFAULT_CACHE_DIR / "pypi" / FRAMEWORKS[framework].pypi_filename).is_file():
        pytest.skip(f"{FRAMEWORKS[framework].pypi_filename} is not cached (test_task_matrix downloads it)")
    ws = materialize(framework, tmp_path / "ws", mode="pypi")
    assert _dead_regions(framework, ws.path) == []


def test_import_blind_plans_copies_and_names_what_does_not_fit(tmp_path):
    spec = importlib.util.spec_from_file_location("import_blind", QA_DIR / "import_blind.py")
    import_blind = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(import_blind)
    q = tmp_path / "torchtitan" / "06-rope"
    q.mkdir(parents=True)
    (q / "correct-1-terse.md").write_text("x")
    (q / "wrong-1-nondefault.md").write_text("x")
    with pytest.raises(ValueError, match="no wrong-1-nondefault.why; say what is wrong"):
        import_blind.plan(tmp_path, "set9")
    (q / "wrong-1-nondefault.why").write_text("why")
    copies = import_blind.plan(tmp_path, "set9")
    names = ("correct-1-terse.md", "wrong-1-nondefault.md", "wrong-1-nondefault.why")
    want = [f"06-rope/blind/set9/torchtitan/{n}" for n in names]
    assert [to.relative_to(QA_DIR).as_posix() for _, to in copies] == want
    (tmp_path / "titan").mkdir()
    with pytest.raises(ValueError, match="titan: not a framework"):
        import_blind.plan(tmp_path, "set9")


def test_every_blind_set_names_the_freeze_its_writers_read_and_validate_passes_it_on():
    import tomllib

    from ate_bench.tasks import load_tasks
    from ate_bench.validate import blind_cases

    sets = tomllib.loads((QA_DIR / "blind_sets.toml").read_text())
    assert all(isinstance(s.get("freeze"), int) for s in sets.values()), "without `freeze`, every slot is asked"
    task = load_tasks(QA_DIR.parent, lambda t: t == "qa-01")["qa-01"]
    cases = [c for c in blind_cases(task, "torchtitan") if c.name.startswith("set13/")]
    assert cases and {c.checker_args for c in cases} == {("--written-at-freeze", str(sets["set13"]["freeze"]))}


def test_the_choice_slots_catch_sets_11_to_13_prose_only_wrong_claims():
    # Megatron's order string read the wrong way round: every citation slot of these answers lands (sets 11-13)
    key = qa_check.load_key(QA_DIR / "01-device-mesh" / "key.toml", "megatron-lm")
    ws = QA_DIR.parent.parent / ".cache-none"  # choice slots and resolving-free checks only
    reversed_order = "dims: pipeline, data, context, tensor, expert\noutermost: tensor\ninnermost: pipeline\n"
    prose = "The order string tp-cp-ep-dp-pp is laid out outermost first."
    block = f"<final-answer>\n{prose}\n{reversed_order}</final-answer>\n"
    fails = qa_check.check(key, ws, block, "megatron-lm")[0]
    assert "FAIL: outermost: tensor is wrong" in " ".join(fails) and "FAIL: innermost: pipeline is wrong" in " ".join(
        fails
    )
    right = block.replace("outermost: tensor", "outermost: pipeline").replace(
        "innermost: pipeline", "innermost: tensor"
    )
    assert not [f for f in qa_check.check(key, ws, right, "megatron-lm")[0] if "most:" in f or "dims:" in f]
    on_option = right.replace("outermost: pipeline", "outermost: data\npath: --use-tp-pp-dp-mapping")
    assert not [f for f in qa_check.check(key, ws, on_option, "megatron-lm")[0] if "most:" in f]
