"""paper/: every output builds from fixture records (tests/fixtures/paper/), with its columns, figure files,
provenance, and reasons in the cells that were not measured; the metrics reach the tables as hand-computed."""

import json
import shutil

import pandas as pd
import pytest

from ate_bench.runner import PIPELINE_CHECK, PIPELINE_CHECK_LABEL
from paper.rebuild.__main__ import main
from paper.rebuild.ate_records import paper_task
from paper.rebuild.common import NOT_MEASURED, REPO, load_paper, sha256
from paper.rebuild.moba import bash_reads_only, turn_kind

FIXTURES = REPO / "tests" / "fixtures" / "paper"
# Every table and the columns a reader (and the figures) rely on.
TABLE_COLUMNS = {
    "code_size": ["framework", "python_lines", "cpp_cuda_lines", "python_native", "registry_lines",
                  "runtime_spec_lines", "skills", "paper_python_lines"],
    "code_size_by_subpackage": ["framework", "subpackage", "python_lines"],
    "throughput": ["config", "mesh", "framework", "runs", "tokens_per_s_per_gpu", "x_torchtitan_compiled",
                   "x_megatron_core", "mfu_vs_measured_peak", "peak_mem_gib", "peak_mem_kind", "command", "status"],
    "throughput_smoke": ["config", "status"],
    "ate_qa": ["task", "framework", "runs", "session_min", "gpu_min", "turns", "context_tokens", "output_tokens",
               "paper_turns", "cited_lines", "term_files", "max_hops", "status"],
    "ate_operate": ["task", "framework", "runs", "turns", "gpu_min", "paper_gpu_min", "paper_turns", "status"],
    "ate_feature": ["task", "framework", "runs", "turns", "gpu_min", "paper_gpu_min", "paper_turns", "status"],
    "skills_ablation": ["task", "framework", "runs_with", "runs_without", "turns_with", "turns_without",
                        "turns_reduction", "turns_reduction_range", "gpu_min_reduction"],
    "moba_token_breakdown": ["framework", "runs", "explore_output_tokens", "edit_output_tokens",
                             "run_output_tokens", "other_output_tokens", "paper_edit_tokens"],
    "moba_failure_locality": ["framework", "tracebacks", "median_workspace_files_per_traceback",
                              "share_innermost_in_edited_file"],
    "moba_turns": ["run", "framework", "turn", "context_tokens", "output_tokens", "kind"],
    "validation_matrix": ["task", "framework", "profile"],
    "validation_cells": ["task", "framework", "profile", "case", "expected", "verdict", "outcome", "reasons"],
    "validation_summary": ["task", "framework", "as expected", "UNEXPECTED", "not run", "not_run_reasons"],
    "validation_blind": ["set", "framework"],
    "agent_free_cost": ["task", "framework", "cost_source"],
}  # fmt: skip
FIGURES = ["code_size", "throughput", "ate_turns", "ate_gpu_time", "skills_ablation", "moba_context",
           "validation_matrix", "validation_blind", "agent_free_cost"]  # fmt: skip


def build(tmp_path_factory, results) -> tuple:
    out = tmp_path_factory.mktemp("paper")
    assert main(["--results", str(results), "--tasks", str(FIXTURES / "tasks"), "--out", str(out)]) == 0
    return out, out / "outputs"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build(tmp_path_factory, FIXTURES / "results")


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    """No records at all: every output must still be written and say why it holds no measurement."""
    return build(tmp_path_factory, tmp_path_factory.mktemp("no-results"))


def table(outputs, name) -> pd.DataFrame:
    return pd.read_csv(outputs / f"{name}.csv")


@pytest.mark.parametrize("which", ["built", "empty"])
def test_every_output_has_its_files_columns_and_provenance(which, request):
    root, outputs = request.getfixturevalue(which)
    prov = {
        p.name.removesuffix(".provenance.json"): json.loads(p.read_text()) for p in outputs.glob("*.provenance.json")
    }
    assert set(TABLE_COLUMNS) | {f"fig_{f}" for f in FIGURES} == set(prov)
    for name, cols in TABLE_COLUMNS.items():
        missing = set(cols) - set(table(outputs, name).columns)
        assert not missing, f"{name}.csv lacks {missing}"
        assert (outputs / f"{name}.md").read_text().startswith("# ")
    for name in FIGURES:
        for ext in ("png", "svg"):
            assert (outputs / f"fig_{name}.{ext}").stat().st_size > 1000, f"fig_{name}.{ext}"
    for name, p in prov.items():
        assert p["commit"] and p["command"].startswith("python -m paper.rebuild") and p["status"], name
        for i in p["inputs"]:  # each named input exists and is the file that was read
            path = REPO / i["path"] if not i["path"].startswith("/") else i["path"]
            assert sha256(path) == i["sha256"], (name, i)
    index = (root / "README.md").read_text()
    assert all(f"| {name} |" in index for name in prov)


def test_index_shows_the_last_reproduce(built, empty):
    assert "## The last `make reproduce` here" in (built[0] / "README.md").read_text()
    assert (
        "validation matrix | `python -m ate_bench validate --profiles smoke` | 161 | yes |"
        in (built[0] / "README.md").read_text()
    )
    assert "The last" not in (empty[0] / "README.md").read_text()


def test_provenance_names_the_records_read(built):
    _, outputs = built
    inputs = {i["path"] for i in json.loads((outputs / "throughput.provenance.json").read_text())["inputs"]}
    assert any(p.endswith("20260102T000000Z-qwen3-30b-a3b-8l.jsonl") for p in inputs)
    assert not any(p.endswith("20260103T000000Z-qwen3-30b-a3b-8l.jsonl") for p in inputs)  # the unfair call
    qa = {i["path"] for i in json.loads((outputs / "ate_qa.provenance.json").read_text())["inputs"]}
    assert any("qa-02_pithtrain_a/record.json" in p for p in qa)
    assert any(p.endswith("paper_reported.toml") for p in qa)  # it shows the paper's numbers


def test_not_measured_cells_say_why(built, empty):
    _, outputs = built
    qa = table(outputs, "ate_qa").set_index("framework")
    assert qa.loc["megatron-lm", "turns"] == "not measured (no agent key)"
    assert qa.loc["megatron-lm", "paper_turns"] == 54  # the paper's number beside, in its own column
    _, none = empty
    for name in TABLE_COLUMNS:
        md = (none / f"{name}.md").read_text()
        status = md.splitlines()[2]
        assert status.startswith(f"Status: {NOT_MEASURED}") or "paper" in status, (name, status)
        if status.startswith(f"Status: {NOT_MEASURED}"):
            assert status.count(":") >= 2 or "(" in status, f"{name}: no reason in {status!r}"
    assert "fair re-measure pending" in (none / "throughput.md").read_text()


def test_ate_medians_hand_computed(built):
    """qa-02 on pithtrain: turns 10/40/20, session 60/600/120 s, output 100/500/300, 2 of 3 passed; the gold
    run (999 turns) is harness validation and must not count."""
    _, outputs = built
    row = table(outputs, "ate_qa").set_index("framework").loc["pithtrain"]
    assert row["runs"] == 3 and row["passed"] == "2/3"
    assert float(row["turns"]) == 20 and float(row["session_min"]) == 2.0 and float(row["output_tokens"]) == 300
    assert float(row["cited_lines"]) == 150 and float(row["term_files"]) == 7  # agent-free cost beside
    assert row["status"] == "measured here"


def test_paper_numbers_go_to_the_task_of_their_category():
    """qa-05's title says "kernel", as the operate task Report Heavy Kernels' `match` does."""
    tasks = load_paper()["ate"]["tasks"]
    assert paper_task(tasks, "qa", "05-attention-dispatch", "Attention-kernel dispatch") is None
    assert paper_task(tasks, "operate", "04-heavy-kernels", "Report Heavy Kernels")["turns"]["pithtrain"] == 42
    assert paper_task(tasks, "qa", "02-hidden-size", "How hidden_size travels")["turns"]["megatron-lm"] == 54


def test_throughput_counts_only_the_latest_fair_call(built):
    """Per framework, its latest fair call; its ratio against the baseline measured in that call."""
    _, outputs = built
    t = table(outputs, "throughput")
    paper_rows = t[t["command"].fillna("").str.startswith("salloc")]
    assert len(paper_rows) == 5 and paper_rows["status"].str.contains("not run here").all()
    t = t.drop(paper_rows.index).set_index("framework")
    assert t.loc["pithtrain-compiled", "tokens_per_s_per_gpu"] == 120  # median of 100, 130, 120; not 999, not 50
    assert t.loc["pithtrain-compiled", "runs"] == 3
    assert t.loc["pithtrain-compiled", "x_torchtitan_compiled"] == pytest.approx(1.5)
    assert t.loc["megatron-core", "status"].startswith("skipped")
    # A later call re-measured FP8 alone: its row is that call's, with no TorchTitan ratio (none in that call).
    assert t.loc["pithtrain-fp8", "tokens_per_s_per_gpu"] == 77 and pd.isna(
        t.loc["pithtrain-fp8", "x_torchtitan_compiled"]
    )


def test_ablation_reduction_and_spread(built):
    _, outputs = built
    row = table(outputs, "skills_ablation").iloc[0]
    assert row["turns_with"] == 12 and row["turns_without"] == 35
    assert row["turns_reduction"] == pytest.approx(1 - 12 / 35)
    assert row["turns_reduction_range"] == f"{1 - 14 / 30:.2f}..{1 - 10 / 40:.2f}"


def test_moba_turns_tokens_and_failure_locality(built):
    _, outputs = built
    turns = table(outputs, "moba_turns")
    assert list(turns["kind"]) == ["explore", "edit", "run", "explore", "other"]
    assert list(turns["context_tokens"]) == [1000, 2000, 3000, 4000, 5000]
    row = table(outputs, "moba_token_breakdown").set_index("framework").loc["pithtrain"]
    assert float(row["explore_output_tokens"]) == 150 and float(row["edit_output_tokens"]) == 200
    loc = table(outputs, "moba_failure_locality").set_index("framework").loc["pithtrain"]
    assert float(loc["median_workspace_files_per_traceback"]) == 2  # site-packages frames are not the workspace
    assert float(loc["share_innermost_in_edited_file"]) == 1.0


def test_validation_takes_the_newest_cell_and_flags_the_unexpected(built):
    _, outputs = built
    cells = table(outputs, "validation_cells").set_index(["task", "case"])
    assert cells.loc[("qa-02", "gold"), "verdict"] == "PASS"  # the newer record's
    assert cells.loc[("qa-02", "fabricated"), "outcome"] == "UNEXPECTED"
    assert cells.loc[("operate-04", "gold"), "outcome"] == "not run"
    assert "CUDA" in cells.loc[("operate-04", "gold"), "reasons"]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The fixture records with every agent run marked a pipeline check (a scripted model's run)."""
    results = tmp_path_factory.mktemp("pipeline-results")
    shutil.copytree(FIXTURES / "results", results, dirs_exist_ok=True)
    for path in (results / "ate").glob("*/record.json"):
        rec = json.loads(path.read_text())
        if rec["agent"]["kind"] == "agent":
            rec["agent"]["kind"] = PIPELINE_CHECK
            path.write_text(json.dumps(rec))
    return build(tmp_path_factory, results)


PIPELINE_OUTPUTS = ["ate_qa", "ate_operate", "ate_feature", "skills_ablation", "moba_token_breakdown",
                    "moba_failure_locality", "moba_turns"]  # fmt: skip


def test_pipeline_checks_build_their_own_labelled_outputs_never_agent_results(pipeline, built):
    root, outputs = pipeline
    for name in PIPELINE_OUTPUTS:
        # The same records give the same table, under its own name and labelled, and no agent result.
        pd.testing.assert_frame_equal(table(outputs, f"pipeline_check_{name}"), table(built[1], name))
        status = (outputs / f"pipeline_check_{name}.md").read_text().splitlines()[2]
        assert status.startswith(f"Status: {PIPELINE_CHECK_LABEL} (measured here"), (name, status)
        assert (outputs / f"{name}.md").read_text().splitlines()[2].startswith(f"Status: {NOT_MEASURED}"), name
    for name in ("ate_turns", "ate_gpu_time", "skills_ablation", "moba_context"):
        prov = json.loads((outputs / f"fig_pipeline_check_{name}.provenance.json").read_text())
        assert prov["status"].startswith(PIPELINE_CHECK_LABEL)
        assert (outputs / f"fig_pipeline_check_{name}.png").is_file()
    index = (root / "README.md").read_text()
    assert "| pipeline_check_ate_qa |" in index and f"{PIPELINE_CHECK_LABEL} (measured here" in index
    assert not any(p.name.startswith("pipeline_check") for p in built[1].iterdir())  # none without such records


@pytest.mark.parametrize(
    "command,reads",
    [("grep -n x a.py | head", True), ("git log -3", True), ("python train.py", False), ("sed -i s/a/b/ f", False),
     ("cat a && bash verify.sh", False)],
)  # fmt: skip
def test_bash_reading_commands(command, reads):
    assert bash_reads_only(command) is reads
    assert turn_kind([("Bash", {"command": command})]) == ("explore" if reads else "run")


def test_blind_rates_per_set_and_framework():
    from paper.rebuild.validation import blind_rates

    rows = [("set1/correct-1.md", "blind-correct", "as expected"), ("set1/correct-2.md", "blind-correct", "UNEXPECTED"),
            ("set1/wrong-1.md", "blind-wrong", "as expected"), ("set2/wrong-1+cited.md", "blind-cited", "as expected"),
            ("set2/wrong-2.md", "blind-wrong", "not run"), ("gold", "gold", "as expected")]  # fmt: skip
    cells = pd.DataFrame([{"framework": "pithtrain", "case": c, "kind": k, "outcome": o} for c, k, o in rows])
    rates = blind_rates(cells).set_index("set")
    assert rates.loc["set1", "correct PASS"] == "1/2 (50%)" and rates.loc["set1", "wrong FAIL"] == "1/1 (100%)"
    assert rates.loc["set2", "wrong FAIL"] == "none"
    assert rates.loc["set2", "wrong + right citations FAIL"] == "1/1 (100%)"
