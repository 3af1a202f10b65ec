"""Result 2, throughput: the local configurations side by side, and the paper's five as rows not run here.

Records: `results/throughput/*.jsonl` (benchmarks/throughput.py, one line per run, each with the command that
made it and its per-step times). A record stands for a measurement only if it is fair (`"input_pipeline":
"synthetic-in-memory"`; before issue 18 TorchTitan tokenized inside its timed step), not a smoke run, ran on
a GPU (`device_name` names an NVIDIA GPU), has status ok and all its timed steps. Per (config, mesh, routing,
framework) the table shows the latest call with such a record: the median over its runs there, the spread
(interquartile range of the per-step tokens/s, and of the runs' medians where there are several) and its
ratios against the baselines measured in that same call (a ratio never spans two calls). A failed, skipped,
smoke, CPU or partial record therefore never displaces a measurement; where a key has none, the table shows
the latest GPU attempt's status. The rebuild lists what it left out and why. The paper's configurations are
the `where = "slurm"` tables of benchmarks/configs.toml. The CPU smoke run (`results/throughput-smoke/`)
checks that the pipeline runs on this machine; it is no speed claim.
"""

import json
import tomllib
from pathlib import Path

import pandas as pd

from paper.rebuild.common import (
    MEASURED,
    NOT_MEASURED,
    PAPERS,
    REPO,
    Build,
    fit_labels,
    framework_colour,
    nothing_measured,
    one_line,
    stale_since,
)

FAIR = "synthetic-in-memory"
BASELINES = ("torchtitan-compiled", "megatron-core")
CONFIGS = REPO / "benchmarks" / "configs.toml"
COLUMNS = [
    "config", "hardware", "gpus", "mesh", "routing", "framework", "runs", "tokens_per_s_per_gpu",
    "steps_q25", "steps_q75", "runs_q25", "runs_q75", "x_torchtitan_compiled", "x_megatron_core",
    "mfu_vs_measured_peak", "peak_mem_gib", "peak_mem_kind", "nvidia_smi_gib", "call_id", "commit", "fresh",
    "command", "status",
]  # fmt: skip
PENDING = "not measured: no fair GPU record with status ok (a fair call: input_pipeline = synthetic-in-memory)"
KEY = ["config", "mesh_s", "routing", "label"]


def read_jsonl(paths: list[Path]) -> pd.DataFrame:
    rows = [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]
    return pd.DataFrame(rows)


def mesh_str(m: dict) -> str:
    return " ".join(f"{k.upper()}{m[k]}" for k in ("pp", "dp", "cp", "ep") if m.get(k, 1) > 1) or "1 GPU"


def exclusions(df: pd.DataFrame) -> dict[str, pd.Series]:
    """Why a record cannot stand for a measurement: one mask per reason (a record may have several)."""
    steps = df["step_times_s"].map(lambda s: len(s) if isinstance(s, list) else 0)
    return {
        f"unfair (input_pipeline is not {FAIR}: TorchTitan tokenized inside its timed step, issue 18)": df[
            "input_pipeline"
        ].fillna("")
        != FAIR,
        "smoke run (CPU pipeline check, no speed claim)": df["smoke"].astype(bool),
        "not on a GPU (device_name names no NVIDIA GPU)": ~df["device_name"].fillna("").str.startswith("NVIDIA"),
        "status is not ok (failed or skipped)": df["status"] != "ok",
        "partial (fewer step times than timed steps)": steps < df["timed_steps"].fillna(0).astype(int),
    }


def step_rates(r) -> list[float]:
    """A run's tokens/s per GPU at each timed step."""
    if not isinstance(r.step_times_s, list) or pd.isna(r.get("global_batch_size")):
        return []
    return [r.global_batch_size * r.seq_len / r.gpus / t for t in r.step_times_s]


def measured_row(runs: pd.DataFrame, usable: pd.DataFrame) -> dict:
    """One (config, mesh, routing, framework) from the runs of one call: medians, spread, ratios in that call."""
    first = runs.iloc[0]
    steps = pd.Series([v for _, r in runs.iterrows() for v in step_rates(r)], dtype=float)
    per_run = runs["tokens_per_s_per_gpu"]
    row = {
        "runs": len(runs),
        "tokens_per_s_per_gpu": per_run.median(),
        "steps_q25": steps.quantile(0.25) if len(steps) else None,
        "steps_q75": steps.quantile(0.75) if len(steps) else None,
        "runs_q25": per_run.quantile(0.25) if len(runs) > 1 else None,
        "runs_q75": per_run.quantile(0.75) if len(runs) > 1 else None,
        "mfu_vs_measured_peak": runs["mfu_measured_peak"].median(),
        "peak_mem_gib": runs["peak_mem_gib"].max(),
        "peak_mem_kind": first["peak_mem_kind"],
        "nvidia_smi_gib": runs["peak_mem_nvidia_smi_gib"].max() if "peak_mem_nvidia_smi_gib" in runs else None,
        "status": MEASURED,
    }
    same_call = usable[(usable["call_id"] == first["call_id"]) & (usable["mesh_s"] == first["mesh_s"])]
    same_call = same_call[(same_call["config"] == first["config"]) & (same_call["routing"] == first["routing"])]
    for base, col in zip(BASELINES, ("x_torchtitan_compiled", "x_megatron_core")):
        ref = same_call[same_call["label"] == base]["tokens_per_s_per_gpu"].median()
        row[col] = row["tokens_per_s_per_gpu"] / ref if ref == ref and ref else None
    return row


def freshness(rec) -> str:
    """ "yes", or why a row is stale: the code its framework ran (pithtrain/ and the framework's runner script) changed
    since the record's commit. The baselines' own code is pinned by version in the record."""
    runner = {"pithtrain": "pithtrain_run.py", "torchtitan": "torchtitan_run.py", "megatron": "megatron_core_run.py"}
    script = next(f"benchmarks/{v}" for k, v in runner.items() if rec["label"].startswith(k))
    watched = ("pithtrain", script) if rec["label"].startswith("pithtrain") else (script,)
    return stale_since(str(rec["git_commit"]), watched) or "yes"


def measured_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per (config, mesh, routing, framework): its latest call with a usable record, else (GPU attempts
    only) the latest attempt's status. Also one line per reason records were left out."""
    df = df.copy()
    df["mesh_s"] = df["mesh"].map(mesh_str)
    why = exclusions(df)
    bad = pd.concat(why, axis=1).any(axis=1)
    # An attempt: a fair GPU run that failed, was skipped or stopped early; shown only where nothing was measured.
    unfair, smoke, cpu = (m for reason, m in why.items() if reason.startswith(("unfair", "smoke", "not on a GPU")))
    usable, attempts = df[~bad], df[bad & ~unfair & ~smoke & ~cpu]
    left_out = [f"{int(m.sum())} records left out: {reason}" for reason, m in why.items() if m.any()]
    rows = []
    for key in sorted(set(pd.concat([usable, attempts])[KEY].itertuples(index=False, name=None))):
        ok = usable[(usable[KEY] == pd.Series(key, index=KEY)).all(axis=1)]
        if len(ok):
            runs = ok[ok["call_id"] == ok["call_id"].max()]
            body = measured_row(runs, usable)
        else:
            tried = attempts[(attempts[KEY] == pd.Series(key, index=KEY)).all(axis=1)]
            if not len(tried):
                continue
            runs = tried[tried["call_id"] == tried["call_id"].max()]
            errors = sorted(set(runs["status"] + ": " + runs["error"].fillna("").map(lambda e: one_line(e, 160))))
            body = {
                "runs": 0,
                "status": f"{NOT_MEASURED}: " + "; ".join(errors) + f" (full text: {runs.iloc[0]['call_id']}.jsonl)",
            }
        first = runs.iloc[0]
        where = {"config": key[0], "hardware": first["device_name"], "gpus": int(first["gpus"]), "mesh": key[1]}
        where |= {"routing": key[2], "framework": key[3], "call_id": first["call_id"], "command": first["command"]}
        rows.append(where | {"commit": str(first["git_commit"])[:7], "fresh": freshness(first)} | body)
    return pd.DataFrame(rows).reindex(columns=COLUMNS), left_out


def paper_configs() -> pd.DataFrame:
    rows = []
    for name, cfg in tomllib.loads(CONFIGS.read_text()).items():
        if cfg.get("where") != "slurm":
            continue
        (m,) = cfg["meshes"]
        mesh = {"pp": m.get("pp", 1), "cp": m.get("cp", 1), "ep": m.get("ep", 1)}
        mesh["dp"] = m["gpus"] // (mesh["pp"] * mesh["cp"] * mesh["ep"])
        rows.append(
            {
                "config": name,
                "hardware": f"{m.get('nodes', 1)} x 8 {cfg['hardware']}",
                "gpus": m["gpus"],
                "mesh": mesh_str(mesh),
                "command": f"salloc --nodes {m.get('nodes', 1)} --gpus-per-node 8 --exclusive "
                f"python3 benchmarks/throughput.py --config {name}",
                "status": f"{NOT_MEASURED}: not run here (needs {m.get('nodes', 1)} x 8 {cfg['hardware']} and SLURM)",
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def smoke_table(b: Build) -> None:
    paths = sorted((b.results / "throughput-smoke").glob("*.jsonl"))
    smoke = read_jsonl(paths)
    if len(smoke):
        smoke = smoke[smoke["call_id"] == smoke["call_id"].max()]
        cols = ["config", "label", "status", "tokens_per_s_per_gpu", "peak_mem_gib", "peak_mem_kind", "git_commit"]
        table, status = smoke[cols + ["call_id", "date"]].rename(columns={"label": "framework"}), MEASURED
        table.insert(1, "hardware", "CPU")
        paths = [p for p in paths if p.stem == smoke["call_id"].iloc[0]]
    else:
        table = pd.DataFrame([{"config": "smoke-tiny", "status": "not measured: run `nox -s reproduce`"}])
        status = f"{NOT_MEASURED}: no smoke record (`python benchmarks/throughput.py --smoke`)"
    stands = "Throughput smoke run on CPU (a tiny model: proves the pipeline runs, not a speed claim)"
    b.table("throughput_smoke", table, paths, status, stands)


def figure(b: Build, table: pd.DataFrame, inputs, status: str, notes) -> None:
    """One panel per measured (config, mesh, routing), one colour per framework, the median on each bar and
    the interquartile range of its step times as the whisker; one panel saying so where nothing is measured."""
    import matplotlib.pyplot as plt

    shown = table[table["status"] == MEASURED]
    panels = list(shown.groupby(["config", "mesh", "routing"], sort=True))
    cols = min(2, max(1, len(panels)))
    rows = max(1, -(-len(panels) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.6 * rows), squeeze=False, sharey=True)
    for ax, ((config, mesh, routing), g) in zip(axes.flat, panels):
        g = g.sort_values("framework")
        low = (g["tokens_per_s_per_gpu"] - g["steps_q25"]).fillna(0).clip(lower=0)
        high = (g["steps_q75"] - g["tokens_per_s_per_gpu"]).fillna(0).clip(lower=0)
        bars = ax.bar(g["framework"], g["tokens_per_s_per_gpu"], color=[framework_colour(f) for f in g["framework"]],
                      yerr=[low, high], capsize=3)  # fmt: skip
        ax.bar_label(bars, labels=[f"{v / 1000:.1f}k" for v in g["tokens_per_s_per_gpu"]], fontsize=7, padding=3)
        commits = sorted(set(g["commit"]))
        title = f"{config}, {mesh}, {routing} routing\n{g['hardware'].iloc[0]}, commit {', '.join(commits)}"
        for r in table[(table["config"] == config) & (table["mesh"] == mesh) & (table["routing"] == routing)
                       & (table["status"] != MEASURED)].itertuples():  # fmt: skip
            why = "out of memory" if "OutOfMemory" in r.status else r.status.split(": ", 1)[1][:60]
            title += f"\nnot measured: {r.framework} ({why}; throughput.md)"
        ax.set_title(title, fontsize=8)
        if len(commits) > 1:  # rows from calls at several commits: each bar names its own
            ax.set_xticks(range(len(g)), [f"{f} @{c}" for f, c in zip(g["framework"], g["commit"])])
        if (g["fresh"] != "yes").any():  # the code it ran changed since: say so under the bar
            labels = [t.get_text() for t in ax.get_xticklabels()]
            ax.set_xticks(range(len(g)), [t + (" (stale)" if f != "yes" else "") for t, f in zip(labels, g["fresh"])])
        ax.set_ylabel("tokens/s per GPU (median; whisker: step IQR)", fontsize=7)
        fit_labels(ax, 12)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_axis_off()
    if panels:
        axes.flat[0].set_ylim(top=shown["tokens_per_s_per_gpu"].max() * 1.15)  # room for the value labels
    else:
        nothing_measured(axes.flat[0], f"{PENDING}. The paper's five configurations need several 8-GPU nodes.")
    fig.tight_layout()
    b.figure("throughput", fig, inputs, status, "Throughput figure: tokens/s per GPU measured here", notes)
    plt.close(fig)


def build(b: Build) -> None:
    paths = sorted((b.results / "throughput").glob("*.jsonl"))
    df = read_jsonl(paths)
    claims = b.paper["throughput"]
    notes = [f"{PAPERS} ({claims['source']}): {c}" for c in claims["claims"]]
    user = claims["user_report"]
    notes.append(
        f"a public user report ({user['source']}; not the paper's measurement, other hardware and shape): "
        f"{user['config']} on {user['hardware']}: "
        + ", ".join(f"{k} {v:,} tokens/s per GPU" for k, v in user["tokens_per_s_per_gpu"].items())
    )
    table, left_out = measured_rows(df) if len(df) else (pd.DataFrame(columns=COLUMNS), [])
    for line in left_out:  # said here, not in the outputs: a record that cannot count changes no output
        print(f"[paper] throughput: {line}", flush=True)
    notes.append("a record that is unfair, a smoke run, not on a GPU, not ok or partial never stands for a measurement"
                 " (`python -m paper.rebuild` prints how many of each it left out)")  # fmt: skip
    notes.append("spread: steps_q25..steps_q75 is the interquartile range of per-step tokens/s over the row's runs; "
                 "runs_q25..runs_q75 that of the runs' medians where a call made several")  # fmt: skip
    status = MEASURED if (table["status"] == MEASURED).any() else PENDING
    inputs = sorted({p for p in paths if p.stem in set(table["call_id"])}) if len(table) else paths
    if not len(table):
        table = pd.DataFrame([{c: "" for c in COLUMNS} | {"status": PENDING}])
    notes.append("the paper's five configurations (benchmarks/configs.toml, where = slurm) are rows with their command")
    stands = "Throughput (tokens/s per GPU): the local configurations side by side, the paper's five not run here"
    b.table("throughput", pd.concat([table, paper_configs()]), inputs + [CONFIGS], status, stands, notes)
    smoke_table(b)
    figure(b, table, inputs + [CONFIGS], status, notes)
