"""paper/: every output builds from fixture records (tests/fixtures/paper/), with its columns, figure files,
provenance, and reasons in the cells that were not measured; the metrics reach the tables as hand-computed."""

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ate_bench.runner import PIPELINE_CHECK, PIPELINE_CHECK_LABEL
from paper.rebuild.__main__ import main
from paper.rebuild.ate_records import load_runs, medians, paper_task
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
    "ate_qa": ["task", "framework", "skills_overlay", "runs", "session_min", "gpu_min", "turns", "context_tokens",
               "output_tokens", "paper_turns", "cited_lines", "term_files", "max_hops", "status"],
    "ate_operate": ["task", "framework", "skills_overlay", "runs", "turns", "gpu_min", "paper_gpu_min", "paper_turns",
                    "status"],
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
    "gold_cost": ["task", "framework", "measure", "gold_files", "gold_lines_added", "gold_lines_removed",
                  "smoke_runs_before_pass", "smoke_runs", "gpu1_runs"],
    "checkpoint_stall": ["commit", "parameters_b", "sync_save_s", "async_stalls_s", "async_max_stall_s",
                         "buffer_allocation_extra_s", "goal_s", "command"],
}  # fmt: skip
FIGURES = ["code_size", "throughput", "ate_turns", "ate_gpu_time", "skills_ablation", "moba_context",
           "validation_matrix", "validation_blind", "agent_free_cost", "checkpoint_stall"]  # fmt: skip


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
    assert "no fair GPU record with status ok" in (none / "throughput.md").read_text()


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
    assert t.loc["megatron-core", "status"].startswith("not measured: skipped")
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


def test_validation_keeps_a_verdict_over_a_newer_not_run_and_says_what_is_stale(built):
    """20260103's record did not run qa-02's noop: the older FAIL stands. Its other cell is a traceback: one line
    in the table. A record naming no commit, or one not in this history, is stale, and says which."""
    cells = table(built[1], "validation_cells").set_index(["task", "case"])
    assert cells.loc[("qa-02", "noop"), "verdict"] == "FAIL"
    assert cells.loc[("operate-04", "noop"), "reasons"] == "RuntimeError: megatron-core needs CUDA"
    assert cells.loc[("qa-02", "gold"), "fresh"] == "stale: the record names no commit"
    assert cells.loc[("operate-04", "noop"), "fresh"] == "stale: made at eeeeeee, a commit not in this history"
    # each profile's row says its own cells' staleness, not another profile's
    profile = cells.loc[("operate-04", "noop"), "profile"]
    summary = table(built[1], "validation_summary").set_index(["task", "framework", "profile"])
    rows = summary.loc[("operate-04", "megatron-lm")]["stale"]
    assert "eeeeeee" in rows[profile] and not rows.drop(profile).str.contains("eeeeeee").any()


@pytest.mark.parametrize(
    "command,reads",
    [("grep -n x a.py | head", True), ("git log -3", True), ("python train.py", False), ("sed -i s/a/b/ f", False),
     ("cat a && bash verify.sh", False)],
)  # fmt: skip
def test_bash_reading_commands(command, reads):
    assert bash_reads_only(command) is reads
    assert turn_kind([("Bash", {"command": command})]) == ("explore" if reads else "run")


def test_blind_rates_keep_each_sets_first_measurement(tmp_path):
    """A set measured at freeze 1 and again after the keys were revised on it: both rows stay, the first is the
    honest one; a set absent from a record has no row there."""
    from types import SimpleNamespace

    from paper.rebuild.validation import blind_rates

    def rates(cp, c, wf, w):
        return {"correct_pass": cp, "correct": c, "wrong_fail": wf, "wrong": w, "cited_fail": wf, "cited": w}

    folder = tmp_path / "ate" / "validation"
    folder.mkdir(parents=True)
    early = {"set1": {"pithtrain": rates(2, 2, 1, 1)}, "set2": {"pithtrain": rates(1, 2, 0, 1)}}
    late = {"set1": {"pithtrain": rates(2, 2, 1, 1)}, "set2": {"pithtrain": rates(2, 2, 1, 1)}}
    (folder / "20260101T000000Z.json").write_text(json.dumps({"commit": "aaaaaaa1", "summary": {"blind": early}}))
    (folder / "20260102T000000Z.json").write_text(json.dumps({"commit": "bbbbbbb2", "summary": {"blind": late}}))
    (folder / "20260103T000000Z.json").write_text(json.dumps({"commit": "ccccccc3", "summary": {}}))
    table, paths = blind_rates(SimpleNamespace(results=tmp_path))
    assert [p.name for p in paths] == ["20260101T000000Z.json", "20260102T000000Z.json"]
    first = table[table["role"] == "first measured here"].set_index("set")
    assert first.loc["set2", "correct PASS"] == "1/2 (50%)" and first.loc["set2", "wrong FAIL"] == "0/1 (0%)"
    assert first.loc["set2", "keys_commit"] == "aaaaaaa"
    again = table[table["role"] == "again, at later keys"].set_index("set")
    assert again.loc["set2", "correct PASS"] == "2/2 (100%)" and len(table) == 4


def test_throughput_step_and_run_spread(built):
    """Steps 0.8/1.0/1.25 s of 100 tokens: 125/100/80 tokens/s, IQR 90..112.5; runs 100/130/120: IQR 110..125."""
    t = table(built[1], "throughput").set_index("framework").loc["pithtrain-compiled"]
    assert (t["steps_q25"], t["steps_q75"], t["runs_q25"], t["runs_q75"]) == (90, 112.5, 110, 125)
    assert t["command"].startswith("python benchmarks/throughput.py --config qwen3-30b-a3b-8l")


def test_records_that_cannot_count_change_no_output(tmp_path_factory, built):
    """A failed CPU record, a failed and a partial GPU record and a smoke record, all newer than the measured call
    for the same (config, mesh, routing, framework), added by hand: every output stays as it was."""
    results = tmp_path_factory.mktemp("results-plus")
    shutil.copytree(FIXTURES / "results", results, dirs_exist_ok=True)
    src = results / "throughput" / "20260102T000000Z-qwen3-30b-a3b-8l.jsonl"
    base = json.loads(src.read_text().splitlines()[0])
    bad = [
        {"device_name": "x86_64", "status": "failed", "error": "Traceback ...\nRuntimeError: no CUDA GPU"},
        {"status": "failed", "error": "torch.OutOfMemoryError: CUDA out of memory"},
        {"timed_steps": 20, "step_times_s": [0.1] * 5, "tokens_per_s_per_gpu": 9999.0},
        {"smoke": True, "device_name": "x86_64", "tokens_per_s_per_gpu": 5.0},
    ]
    for i, change in enumerate(bad):
        call = f"2026020{i + 1}T000000Z-qwen3-30b-a3b-8l"
        (results / "throughput" / f"{call}.jsonl").write_text(json.dumps(base | {"call_id": call} | change) + "\n")
    _, again = build(tmp_path_factory, results)
    _, before = built
    for path in sorted(before.iterdir()):
        if path.name.endswith(".provenance.json"):
            old, new = (json.loads(p.read_text()) for p in (path, again / path.name))
            for prov in (old, new):  # the same records read, from another folder, by another command line
                prov |= {
                    "built_at": "",
                    "command": "",
                    "inputs": sorted((Path(i["path"]).name, i["sha256"]) for i in prov["inputs"]),
                }
            assert old == new, path.name
        elif path.suffix in (".csv", ".md", ".svg"):
            assert path.read_text() == (again / path.name).read_text(), path.name


def test_claims_table_opens_the_index_and_the_paper_sources_are_inside(built):
    """Every claim row names an output that exists; the paper's numbers cite no file outside the repository."""
    index = (built[0] / "README.md").read_text()
    assert index.index("## Claims") < index.index("## Badge guide") < index.index("## Outputs")
    rows = [r for r in index.split("## Claims")[1].split("## Badge")[0].splitlines() if r.startswith("| ") and "`" in r]
    assert len(rows) == 11
    for row in rows:
        for out in row.split(" | ")[3].split(", "):
            assert (built[1] / out.replace(".md", ".csv")).exists() or (built[1] / out).exists(), out
    reported = (REPO / "paper" / "data" / "paper_reported.toml").read_text()
    assert "../" not in reported and "paper_sources.md" in reported
    assert (REPO / "paper" / "data" / "paper_sources.md").read_text().count("\n> ") >= 8


def test_compare_says_same_within_tolerance_or_differs(tmp_path, built):
    """A copy of the outputs is the same; throughput moved by 2% is within its 5%; a verdict changed differs,
    naming the cell; a missing folder is one line and exit 2."""
    from paper.compare import compare, main

    new = tmp_path / "outputs"
    shutil.copytree(built[1], new)
    assert {v for _, v, _ in compare(built[1], new)} <= {"same", "same records"}
    t = pd.read_csv(new / "throughput.csv")
    t.loc[t["framework"] == "pithtrain-compiled", "tokens_per_s_per_gpu"] *= 1.02
    t.to_csv(new / "throughput.csv", index=False)
    cells = pd.read_csv(new / "validation_cells.csv")
    cells.loc[cells["case"] == "gold", "verdict"] = "FAIL"
    cells.to_csv(new / "validation_cells.csv", index=False)
    verdicts = {n: (v, d) for n, v, d in compare(built[1], new)}
    assert verdicts["throughput"][0].startswith("within tolerance (numbers within 5%")
    assert (
        verdicts["validation_cells"][0] == "differs"
        and "gold') verdict: 'PASS' -> 'FAIL'" in verdicts["validation_cells"][1]
    )
    assert main(["--new", str(tmp_path / "nothing")]) == 2


def test_compare_tells_a_blind_set_measured_again_from_a_changed_measurement(tmp_path, built):
    """validation_blind has a row per measurement: a rebuild after a new validation run adds one ("again, at later
    keys") and changes none, which is not "differs"; a reference row changed or gone still is."""
    from paper.compare import compare

    new = tmp_path / "outputs"
    shutil.copytree(built[1], new)
    blind = pd.read_csv(new / "validation_blind.csv", dtype=str, keep_default_na=False)
    again = blind.iloc[[0]].assign(record="20990101T000000Z.json", role="again, at later keys")
    pd.concat([again, blind]).to_csv(new / "validation_blind.csv", index=False)
    verdict, detail = {n: (v, d) for n, v, d in compare(built[1], new)}["validation_blind"]
    assert verdict == "same, plus new measurements" and detail.startswith("1 row(s) added: ")
    pd.concat([again, blind.iloc[1:]]).to_csv(new / "validation_blind.csv", index=False)  # one added, one gone
    assert {n: v for n, v, _ in compare(built[1], new)}["validation_blind"] == "differs"


def test_scrub_records_removes_machine_paths_and_gives_each_call_its_command(tmp_path):
    """paper/scrub_records.py: tool words and absolute paths outside the repository go, a throughput call without
    a command gets the equivalent one, and a second pass changes nothing."""
    from paper.scrub_records import main

    (tmp_path / "throughput").mkdir()
    log = tmp_path / "throughput" / "x.log"
    log.write_text("device call 2 of this session (run tool, nvidia-h200, machine held 9 s)\n"
                   "records: /root/out/throughput/x.jsonl in /tmp/pith-abc/y and /work/main/tasks/qa\n")  # fmt: skip
    rec = {"smoke": False, "label": "pithtrain-compiled", "gpus": 1, "routing": "balanced", "config": "c",
           "warmup_steps": 10, "timed_steps": 20, "config_table": {"warmup_steps": 10, "timed_steps": 20}}  # fmt: skip
    jsonl = tmp_path / "throughput" / "x.jsonl"
    jsonl.write_text(json.dumps(rec) + "\n" + json.dumps(rec | {"label": "torchtitan-compiled"}) + "\n")
    assert main(["--results", str(tmp_path)]) == 0
    assert log.read_text() == "GPU call 2 (H200 x1)\nrecords: $OUT/throughput/x.jsonl in <tmp>/y and tasks/qa\n"
    out = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert {r["command"] for r in out} == {
        "python benchmarks/throughput.py --config c --frameworks pithtrain-compiled,torchtitan-compiled --gpus 1 "
        "--balanced-routing"
    }
    before = {p: p.read_text() for p in (log, jsonl)}
    assert main(["--results", str(tmp_path)]) == 0 and {p: p.read_text() for p in (log, jsonl)} == before


def test_checkpoint_stall_reports_each_save_and_the_worst(built):
    row = table(built[1], "checkpoint_stall").iloc[0]
    assert (row["sync_save_s"], row["async_stalls_s"], row["async_max_stall_s"]) == (30.0, "0.30 0.75", 0.75)
    assert (row["parameters_b"], row["buffer_allocation_extra_s"], row["goal_s"]) == (1.3, 10.0, 2.0)


def test_validation_figure_groups_cases_into_columns():
    """The matrix figure has one column per group of cases (over 300 cases made each column thinner than its grid
    line); the order puts gold and noop first and each blind set's roles together."""
    from paper.rebuild.validation import _group_order, case_group

    cases = [("gold", "gold"), ("generated", "shifted"), ("wrong-md", "wrong-lines.md"), ("wrong-sh", "blind-x.sh"),
             ("wrong-sh", "blind3-y.sh"), ("blind-cited", "set10/wrong-2-mechanism+cited.md"),
             ("blind-correct", "set10/correct-1-terse.md"), ("blind-wrong", "set9/wrong-1-nondefault.md")]  # fmt: skip
    groups = [case_group(kind, case) for kind, case in cases]
    assert groups == ["gold", "shifted", "hand-written wrong", "near misses 1", "near misses 3",
                      "set10 wrong + right citations", "set10 correct", "set9 wrong"]  # fmt: skip
    assert sorted(groups, key=_group_order) == ["gold", "shifted", "hand-written wrong", "near misses 1",
                                                "near misses 3", "set9 wrong", "set10 correct",
                                                "set10 wrong + right citations"]  # fmt: skip


def test_gold_cost_measures_the_real_golds_and_counts_runs_to_the_first_pass(tmp_path):
    """The repository's golds against records written here: feature-01's size is its patch's `git apply --numstat`
    (run outside any checkout), operate-02's the files of its gold folder; runs skip "not run" records."""
    import subprocess

    from paper.rebuild.common import Build
    from paper.rebuild.gold_cost import build as build_gold_cost

    def record(verdicts: dict) -> dict:
        cells = [{"task": t, "framework": "pithtrain", "profile": p, "case": "gold", "kind": "gold", "verdict": v}
                 for (t, p), v in verdicts.items()]  # fmt: skip
        return {"commit": "", "cells": cells}

    folder = tmp_path / "results" / "ate" / "validation"
    folder.mkdir(parents=True)
    smoke_02, gpu1_01 = ("operate-02", "smoke"), ("feature-01", "gpu1")
    history = [{smoke_02: "ERROR", gpu1_01: "FAIL"}, {smoke_02: "not run", gpu1_01: "FAIL"}, {smoke_02: "FAIL"},
               {smoke_02: "PASS"}, {smoke_02: "FAIL"}]  # fmt: skip
    for i, verdicts in enumerate(history):
        (folder / f"2026010{i + 1}T000000Z.json").write_text(json.dumps(record(verdicts)))
    # an operate gpu1 call's record (tasks/operate/gpu1_golds.sh): cells named by the task's folder, no "kind"
    gpu1 = tmp_path / "results" / "ate" / "gpu1"
    gpu1.mkdir(parents=True)
    cells = [{"task": "02-train-evaluate", "framework": "torchtitan", "profile": "gpu1", "case": c, "verdict": v}
             for c, v in (("noop", "FAIL"), ("gold", "PASS"))]  # fmt: skip
    (gpu1 / "20260103T0000Z-operate-gpu1-torchtitan.json").write_text(json.dumps({"cells": cells}))
    out = tmp_path / "outputs"
    build_gold_cost(
        Build(results=tmp_path / "results", tasks=REPO / "tasks", out=out, command="python -m paper.rebuild")
    )
    cost = table(out, "gold_cost").set_index(["task", "framework"])
    titan = cost.loc[("operate-02", "torchtitan")]
    assert (titan["gpu1_runs_before_pass"], titan["gpu1_runs"], titan["smoke_runs"]) == ("0", "1", "not run")

    gold = REPO / "tasks" / "feature" / "01-moba" / "gold" / "pithtrain"
    numstat = subprocess.run(["git", "apply", "--numstat", str(next(gold.glob("*.patch")))], cwd=tmp_path,
                             capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    moba = cost.loc[("feature-01", "pithtrain")]
    assert int(moba["gold_files"]) == len(numstat)
    assert int(moba["gold_lines_added"]) == sum(int(line.split()[0]) for line in numstat)
    assert int(moba["gold_lines_removed"]) == sum(int(line.split()[1]) for line in numstat)
    assert moba["gpu1_runs_before_pass"] == "no PASS" and moba["gpu1_runs"] == "2"
    assert moba["smoke_runs"] == "not run"

    train = cost.loc[("operate-02", "pithtrain")]
    gold = REPO / "tasks" / "operate" / "02-train-evaluate" / "gold" / "pithtrain"
    files = [p for p in gold.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert int(train["gold_files"]) == len(files) and int(train["gold_lines_removed"]) == 0
    assert (train["smoke_runs_before_pass"], train["smoke_runs"]) == ("2", "4")  # ERROR, FAIL, then PASS
    megatron = cost.loc[("feature-01", "megatron-lm")]  # a gold no record has run: sized, its runs "not run"
    assert int(megatron["gold_lines_added"]) > 0
    assert (megatron[["smoke_runs", "gpu1_runs", "paper_runs"]] == "not run").all()
    status = (out / "gold_cost.md").read_text().splitlines()[2]
    assert status == "Status: measured here."


def test_gold_size_counts_the_gold_not_the_bytecode_running_it_left(tmp_path):
    """An operate gold's files and lines: a link to another gold's script counts (the file it names), and the
    __pycache__ that running the gold's scripts here leaves does not (it made paper/ differ from a fresh clone's)."""
    from paper.rebuild.gold_cost import gold_size

    gold = tmp_path / "gold"
    (gold / "__pycache__").mkdir(parents=True)
    (tmp_path / "shared.py").write_text("a = 1\nb = 2\n")
    (gold / "solve.sh").write_text("#!/bin/sh\npython shared.py\n")
    (gold / "shared.py").symlink_to(tmp_path / "shared.py")
    (gold / "__pycache__" / "shared.cpython-311.pyc").write_bytes(b"\x00\n\n\n")
    size, measured = gold_size(gold, "operate")
    assert size == {"gold_files": 2, "gold_lines_added": 4, "gold_lines_removed": 0}
    assert [p.name for p in measured] == ["shared.py", "solve.sh"]


def test_runs_with_the_skills_overlay_are_kept_apart(tmp_path):
    """Issue 28: TorchTitan runs with our capture-profile skill overlaid (`--skills-overlay`) are another arm than
    runs without it; their medians must not pool (records from before the overlay read as "none")."""
    base = json.loads(next((REPO / "tests" / "fixtures").rglob("qa-02_pithtrain_a/record.json")).read_text())
    for run_id, overlay, turns in (("a", None, 10), ("b", ["capture-profile"], 30), ("c", ["capture-profile"], 50)):
        rec = json.loads(json.dumps(base))
        rec["run_id"], rec["metrics"]["agent_turns"] = run_id, turns
        rec["framework"] |= {"name": "torchtitan", "mode": "pypi", "version": "0.2.2", "skills": "kept"}
        if overlay:
            rec["framework"]["skills_overlay"] = overlay
        (tmp_path / "ate" / run_id).mkdir(parents=True)
        (tmp_path / "ate" / run_id / "record.json").write_text(json.dumps(rec))
    runs, _ = load_runs(tmp_path)
    med = medians(runs).set_index("skills_overlay")
    assert med.loc["none", "turns"] == 10 and med.loc["none", "runs"] == 1
    assert med.loc["capture-profile", "turns"] == 40 and med.loc["capture-profile", "runs"] == 2


def test_matrix_holds_a_near_miss_of_one_profile_as_not_run_on_the_others(tmp_path):
    """MoBA's blind-enable-default-block.sh says it is a near miss only on smoke: an older gpu1 record's PASS of it
    (the default block size is right there) shows as "not run" with that reason, as `validate` records it today;
    its smoke cell keeps its verdict."""
    from types import SimpleNamespace

    from paper.rebuild.validation import load_cells

    case = "blind-enable-default-block.sh"
    assert "# Near miss only on smoke" in (REPO / "tasks/feature/01-moba/wrong/pithtrain" / case).read_text()
    cell = {"task": "feature-01", "framework": "pithtrain", "case": case, "kind": "wrong-sh", "expected": "FAIL"}
    cells = [cell | {"profile": p, "verdict": v, "reasons": []} for p, v in (("gpu1", "PASS"), ("smoke", "FAIL"))]
    (tmp_path / "ate" / "validation").mkdir(parents=True)
    (tmp_path / "ate" / "validation" / "20260101T000000Z.json").write_text(json.dumps({"commit": "", "cells": cells}))
    got = load_cells(SimpleNamespace(results=tmp_path, tasks=REPO / "tasks", rel=lambda p: p.relative_to(REPO)))[0]
    got = got.set_index("profile")
    assert got.loc["gpu1", "verdict"] == "not run" and "a near miss only on smoke" in got.loc["gpu1", "reasons"]
    assert got.loc["gpu1", "fresh"] == "yes"  # HEAD's header decides it, not the record's old commit
    assert got.loc["smoke", "verdict"] == "FAIL" and got.loc["smoke", "outcome"] == "as expected"


def test_matrix_leaves_out_a_wrong_case_removed_from_its_task(tmp_path):
    """MoBA's blind3-mean-by-block-size.sh left wrong/ as no near miss (equivalent under causal attention): an older
    record's PASS of it is left out of the matrix and counted, not shown as an UNEXPECTED cell of a case that is gone;
    a case still there keeps its cell."""
    from types import SimpleNamespace

    from paper.rebuild.validation import load_cells

    wrong = REPO / "tasks/feature/01-moba/wrong/pithtrain"
    gone, kept = "blind3-mean-by-block-size.sh", "future-blocks-allowed.sh"
    assert not (wrong / gone).exists() and (wrong / kept).is_file()
    cell = {"task": "feature-01", "framework": "pithtrain", "profile": "smoke", "kind": "wrong-sh", "expected": "FAIL"}
    cells = [cell | {"case": c, "verdict": v, "reasons": []} for c, v in ((gone, "PASS"), (kept, "FAIL"))]
    (tmp_path / "ate" / "validation").mkdir(parents=True)
    (tmp_path / "ate" / "validation" / "20260101T000000Z.json").write_text(json.dumps({"commit": "", "cells": cells}))
    build = SimpleNamespace(results=tmp_path, tasks=REPO / "tasks", rel=lambda p: p.relative_to(REPO))
    got, _, removed = load_cells(build)
    assert list(got["case"]) == [kept] and removed == 1


def test_matrix_leaves_out_a_case_a_newer_whole_run_of_its_row_no_longer_has(tmp_path):
    """An adjudication renames a blind answer's case ("set2/wrong-1-nondefault.md" becomes "... [adjudicated
    correct]"): once a newer record ran the row whole, the old name's cell is of a case that is gone, and is left
    out and counted. A record that ran only some cases (--cases) decides nothing about the others, and a case that
    a later record ran is kept."""
    from types import SimpleNamespace

    from paper.rebuild.validation import load_cells

    old, new, later = "set2/wrong-1-nondefault.md", "set2/wrong-1-nondefault.md [adjudicated correct]", "set9/x.md"
    cell = {"task": "qa-06", "framework": "pithtrain", "profile": "", "kind": "blind-correct", "expected": "PASS"}
    whole = ["python -m ate_bench", "validate", "--tasks", "qa-*"]
    records = {  # name: (command, cases)
        "20260101T000000Z.json": (whole, [old, "gold"]),
        "20260102T000000Z.json": (whole + ["--cases", "gold"], ["gold"]),
        "20260103T000000Z.json": (whole, [new, "gold"]),
        "20260104T000000Z.json": (whole + ["--cases", "set9/*"], [later]),
    }
    (tmp_path / "ate" / "validation").mkdir(parents=True)
    for name, (command, cases) in records.items():
        cells = [cell | {"case": c, "verdict": "PASS", "reasons": []} for c in cases]
        rec = {"commit": "", "complete": True, "command": command, "cells": cells}
        (tmp_path / "ate" / "validation" / name).write_text(json.dumps(rec))
    build = SimpleNamespace(results=tmp_path, tasks=REPO / "tasks", rel=lambda p: p.relative_to(REPO))
    got, _, removed = load_cells(build)
    assert sorted(got["case"]) == sorted(["gold", new, later]) and removed == 1
    assert got.set_index("case").loc["gold", "record"] == "20260103T000000Z.json"
    # without the newer whole run, the old name's cell is still the row's
    (tmp_path / "ate" / "validation" / "20260103T000000Z.json").unlink()
    got, _, removed = load_cells(build)
    assert old in set(got["case"]) and removed == 0


def test_a_gpu_records_cells_are_as_fresh_as_the_commit_its_tree_travelled_from():
    """A GPU call commits its travelled tree anew (a commit in no history here): its cells' freshness is the
    travelled commit's, not 'stale: not in this history'."""
    from paper.rebuild.validation import freshness, source_commit

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    record = {"commit": "e2ad8a7f9c98b00f237706a9348f45ec20674e9e", "travelled_commit": head}
    assert source_commit(record) == head and source_commit({"commit": head}) == head
    paths = {"feature-01": "tasks/feature/01-moba"}
    assert freshness(source_commit(record), "feature-01", "torchtitan", paths) == ""
    assert freshness(record["commit"], "feature-01", "torchtitan", paths).startswith("stale: made at e2ad8a7")


def test_a_cell_is_not_made_stale_by_another_frameworks_gold(monkeypatch):
    """A TorchTitan gold added to a task leaves its pithtrain cells fresh: freshness watches the task's folder but for
    the folders named after the other frameworks (gold/, wrong/, prepare/<profile>/)."""
    from paper.rebuild import validation

    seen = []
    monkeypatch.setattr(validation, "stale_since", lambda commit, paths: seen.append(paths) or "")
    validation.freshness("abc", "feature-01", "pithtrain", {"feature-01": "tasks/feature/01-moba"})
    assert seen[0][:2] == ("tasks/feature/01-moba", "pithtrain")
    assert set(seen[0][2:]) == {
        ":(exclude,glob)tasks/feature/01-moba/**/torchtitan/**",
        ":(exclude,glob)tasks/feature/01-moba/**/torchtitan",
        ":(exclude,glob)tasks/feature/01-moba/**/megatron-lm/**",
        ":(exclude,glob)tasks/feature/01-moba/**/megatron-lm",
        ":(exclude)tasks/feature/01-moba/task.toml",  # compared apart: less the other frameworks' [unrunnable]
    }
    mine = validation.own_task_toml("HEAD", "tasks/feature/01-moba", "pithtrain")
    assert mine and all(cell.startswith("pithtrain/") for cell in mine["unrunnable"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    if head:  # git itself takes the pathspecs
        monkeypatch.undo()
        assert validation.freshness(head, "feature-01", "torchtitan", {"feature-01": "tasks/feature/01-moba"}) == ""


def test_a_cell_is_stale_for_its_own_near_miss_only(monkeypatch):
    """A fixed near miss leaves the gold, the noop and the other near misses of its framework fresh: a cell watches the
    task less wrong/<framework>/, then its own case's file there; a cost row (no case) watches it all."""
    from paper.rebuild import validation

    seen = []
    changed = "tasks/operate/02-train-evaluate/wrong/torchtitan/fresh-export.sh"
    monkeypatch.setattr(
        validation, "stale_since", lambda commit, paths: seen.append(paths) or ("stale" if changed in paths else "")
    )
    monkeypatch.setattr(validation, "own_task_toml", lambda commit, folder, framework: {})
    paths = {"operate-02": "tasks/operate/02-train-evaluate"}
    assert validation.freshness("abc", "operate-02", "torchtitan", paths, "gold") == ""
    assert ":(exclude,glob)tasks/operate/02-train-evaluate/wrong/torchtitan/**" in seen[0]
    assert validation.freshness("abc", "operate-02", "torchtitan", paths, "not-here.sh") == ""
    assert validation.freshness("abc", "operate-02", "torchtitan", paths, "fresh-export.sh") == "stale"
    seen.clear()
    validation.freshness("abc", "operate-02", "torchtitan", paths)  # a cost row
    assert not any("/wrong/torchtitan" in p for p in seen[0])
