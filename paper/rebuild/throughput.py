"""Result 2, throughput: the local configurations side by side, and the paper's five as rows not run here.

Records: `results/throughput/*.jsonl` (benchmarks/throughput.py, one line per run). Only fair records
count: those with `"input_pipeline": "synthetic-in-memory"` (issue 18: before it, TorchTitan's side
tokenized its corpus inside the timed step, so its speed was understated). Each (config, mesh, routing,
framework) shows its latest fair call, the median over its runs there, and its ratios against the baselines
measured in that same call (a later call may re-measure some frameworks only: a ratio never spans two calls).
The paper's configurations are the `where = "slurm"` tables of benchmarks/configs.toml. The CPU smoke run
(`results/throughput-smoke/`) checks that the pipeline runs on this machine; it is no speed claim.
"""

import json
import tomllib
from pathlib import Path

import pandas as pd

from paper.rebuild.common import MEASURED, NOT_MEASURED, PAPERS, REPO, Build

FAIR = "synthetic-in-memory"
BASELINES = ("torchtitan-compiled", "megatron-core")
CONFIGS = REPO / "benchmarks" / "configs.toml"
COLUMNS = [
    "config", "hardware", "gpus", "mesh", "routing", "framework", "runs", "tokens_per_s_per_gpu",
    "x_torchtitan_compiled", "x_megatron_core", "mfu_vs_measured_peak", "peak_mem_gib", "peak_mem_kind",
    "nvidia_smi_gib", "call_id", "commit", "command", "status",
]  # fmt: skip
PENDING = "not measured: fair re-measure pending (no record with input_pipeline = synthetic-in-memory)"


def read_jsonl(paths: list[Path]) -> pd.DataFrame:
    rows = [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]
    return pd.DataFrame(rows)


def mesh_str(m: dict) -> str:
    return " ".join(f"{k.upper()}{m[k]}" for k in ("pp", "dp", "cp", "ep") if m.get(k, 1) > 1) or "1 GPU"


def measured_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (config, mesh, routing, framework) from its latest fair call: medians over runs, ratios against
    the baselines of that call."""
    df = df.copy()
    df["mesh_s"] = df["mesh"].map(mesh_str)
    rows = []
    keys = ["call_id", "config", "gpus", "mesh_s", "routing", "label"]
    for (call_id, config, gpus, mesh, routing, label), g in df.groupby(keys):
        ok = g[g["status"] == "ok"]
        rows.append(
            {
                "config": config,
                "hardware": g["device_name"].iloc[0],
                "gpus": int(gpus),
                "mesh": mesh,
                "routing": routing,
                "framework": label,
                "runs": len(ok),
                "tokens_per_s_per_gpu": ok["tokens_per_s_per_gpu"].median() if len(ok) else None,
                "mfu_vs_measured_peak": ok["mfu_measured_peak"].median() if len(ok) else None,
                "peak_mem_gib": ok["peak_mem_gib"].max() if len(ok) else None,
                "peak_mem_kind": ok["peak_mem_kind"].iloc[0] if len(ok) else "",
                "nvidia_smi_gib": ok["peak_mem_nvidia_smi_gib"].max() if "peak_mem_nvidia_smi_gib" in ok else None,
                "call_id": call_id,
                "commit": str(g["git_commit"].iloc[0])[:7],  # rows may come from calls of several commits
                "status": MEASURED if len(ok) else "; ".join(sorted(set(g["status"] + ": " + g["error"].fillna("")))),
            }
        )
    out = pd.DataFrame(rows)
    for base, col in zip(BASELINES, ("x_torchtitan_compiled", "x_megatron_core")):
        ref = out[out["framework"] == base].set_index(["call_id", "config", "mesh", "routing"])["tokens_per_s_per_gpu"]
        keys = list(zip(out["call_id"], out["config"], out["mesh"], out["routing"]))
        out[col] = [
            t / ref[k] if k in ref.index and ref[k] else None for t, k in zip(out["tokens_per_s_per_gpu"], keys)
        ]
    latest = out.groupby(["config", "mesh", "routing", "framework"])["call_id"].transform("max")
    return out[out["call_id"] == latest].reindex(columns=COLUMNS)


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


def build(b: Build) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    paths = sorted((b.results / "throughput").glob("*.jsonl"))
    df = read_jsonl(paths)
    notes = []
    fair = df[df.get("input_pipeline", pd.Series(index=df.index, dtype=object)) == FAIR] if len(df) else df
    fair = fair[~fair["smoke"].astype(bool)] if len(fair) else fair
    if len(df) > len(fair):
        unfair = df[~df.index.isin(fair.index)]
        notes.append(
            f"{len(unfair)} records of {unfair['call_id'].nunique()} calls lack input_pipeline = {FAIR} "
            "(TorchTitan tokenized inside its timed step, issue 18): left out"
        )
    claims = b.paper["throughput"]
    notes += [f"{PAPERS} ({claims['source']}): {c}" for c in claims["claims"]]
    if len(fair):
        table = measured_rows(fair)
        status = MEASURED
        inputs = sorted({p for p in paths if p.stem in set(table["call_id"])})
    else:
        table = pd.DataFrame([{c: "" for c in COLUMNS} | {"status": PENDING}])
        status = PENDING
        inputs = paths
    notes.append("the paper's five configurations (benchmarks/configs.toml, where = slurm) are rows with their command")
    stands = "Throughput (tokens/s per GPU): the local configurations side by side, the paper's five not run here"
    b.table("throughput", pd.concat([table, paper_configs()]), inputs + [CONFIGS], status, stands, notes)

    smoke_paths = sorted((b.results / "throughput-smoke").glob("*.jsonl"))
    smoke = read_jsonl(smoke_paths)
    if len(smoke):
        smoke = smoke[smoke["call_id"] == smoke["call_id"].max()]
        cols = ["config", "label", "status", "tokens_per_s_per_gpu", "peak_mem_gib", "peak_mem_kind", "git_commit"]
        cols += ["call_id", "date"]
        smoke_table, smoke_status = smoke[cols].rename(columns={"label": "framework"}), MEASURED
    else:
        smoke_table = pd.DataFrame([{"config": "smoke-tiny", "status": "not measured: run `nox -s reproduce`"}])
        smoke_status = f"{NOT_MEASURED}: no smoke record (`python benchmarks/throughput.py --smoke`)"
    b.table(
        "throughput_smoke",
        smoke_table,
        smoke_paths,
        smoke_status,
        "Throughput smoke run on CPU (a tiny model: proves the pipeline runs, not a speed claim)",
    )

    user = claims["user_report"]
    fig_rows = [
        {"panel": f"{PAPERS}: user report, {user['config']}, {user['hardware']}", "framework": f, "tokens/s per GPU": v}
        for f, v in user["tokens_per_s_per_gpu"].items()
    ]
    if len(fair):
        fig_rows += [
            {"panel": f"measured: {r.config}, {r.mesh}, {r.routing}", "framework": r.framework,
             "tokens/s per GPU": r.tokens_per_s_per_gpu}
            for r in table.itertuples() if r.status == MEASURED
        ]  # fmt: skip
    fdf = pd.DataFrame(fig_rows)
    wrap = min(2, fdf["panel"].nunique())
    grid = sns.catplot(
        data=fdf, kind="bar", x="framework", y="tokens/s per GPU", col="panel", col_wrap=wrap, sharex=False,
        sharey=False, height=3.2, aspect=1.4, color="#4c72b0",
    )  # fmt: skip
    grid.set_titles("{col_name}", size=8)
    grid.tick_params(axis="x", rotation=30, labelsize=7)
    if not len(fair):
        grid.figure.suptitle(PENDING, y=1.04, fontsize=8)
    b.figure("throughput", grid.figure, inputs + [CONFIGS], status, "Throughput figure: tokens/s per GPU", notes)
    plt.close("all")
