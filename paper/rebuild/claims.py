"""The claims table and the badge guide that open paper/README.md, read from the outputs just built.

One row per claim of the paper (code size, throughput parity, FP8, ATE per category, skills ablation, MoBA
case study) and per result of ours (checker validation, agent-free cost): the paper's value (from
data/paper_reported.toml), ours (from the output file named in the row), the hardware, the command, the time
it took here and the status. No number here is typed: each comes from an output, a record or the paper's file.
"""

import json
import tomllib

import pandas as pd

from paper.rebuild.common import NOT_MEASURED, REPO, Build

CONFIGS = REPO / "benchmarks" / "configs.toml"
NO_AGENT = f"{NOT_MEASURED}: needs an agent key (the command of the row)"


def read(b: Build, name: str) -> pd.DataFrame:
    path = b.out / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


def measured(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"].astype(str).str.startswith("measured")] if "status" in df else df.iloc[0:0]


def ratio_text(rows: pd.DataFrame, col: str, base: str) -> str:
    shown = rows[rows[col].notna()]
    return "; ".join(f"{r[col]:.2f}x {base} on {r.config} ({r.mesh}, {r.routing})" for _, r in shown.iterrows())


def code_size_row(b: Build) -> dict:
    t, paper = read(b, "code_size"), b.paper["code_size"]["lines"]
    lines = pd.to_numeric(t["python_lines"], errors="coerce") if len(t) else pd.Series(dtype=float)
    ours = "; ".join(f"{f} {v:,.0f}" for f, v in zip(t.get("framework", []), lines) if v == v)
    theirs = "; ".join(f"{k} {v:,}" for k, v in paper.items())
    return {"claim": "1 code size: the trainer fits one agent context (lines of Python, main package)",
            "paper": theirs, "ours": ours or NOT_MEASURED, "output": "code_size.md",
            "status": "measured here; `pithtrain` is our trainer, a different code base from the authors' "
                      "(notes in code_size.md: what each count includes)"}  # fmt: skip


def throughput_rows(b: Build) -> list[dict]:
    t, claims = measured(read(b, "throughput")), b.paper["throughput"]["claims"]
    ours = t[t["framework"] == "pithtrain-compiled"] if len(t) else t
    user = b.paper["throughput"]["user_report"]
    report = ", ".join(f"{k} {v:,}" for k, v in user["tokens_per_s_per_gpu"].items())
    not_paper = "; configurations the paper never ran (1-GPU slices of 4 and 8 of Qwen3-30B-A3B's 48 layers)"
    fp8 = []
    for key, g in t.groupby(["config", "mesh", "routing", "call_id"]) if len(t) else []:
        v = g.set_index("framework")["tokens_per_s_per_gpu"]
        if {"pithtrain-fp8", "pithtrain-compiled"} <= set(v.index):
            fp8.append(f"FP8/BF16 {v['pithtrain-fp8'] / v['pithtrain-compiled']:.3f} on {key[0]} ({key[1]}, {key[2]})")
    # The table keeps each framework's newest run; a ratio exists only within one call, so megatron-core's row can
    # outlive every pithtrain row of its call (a newer call without it): say where it is instead of "not measured".
    mc_calls = sorted(set(t[t["framework"] == "megatron-core"]["call_id"])) if len(t) else []
    mc_older = f"megatron-core not in the newest call of any config (its rows in throughput.md: {', '.join(mc_calls)})"
    return [
        {"claim": "2 throughput parity with Megatron-LM", "paper": claims[0],
         "ours": (ratio_text(ours, "x_megatron_core", "megatron-core") or (mc_older if mc_calls else NOT_MEASURED))
         + not_paper,
         "output": "throughput.md, fig_throughput.png",
         "status": "not reproduced: the paper's five configurations need 1-8 nodes of 8 H100 (rows in throughput.md)"},
        {"claim": "2 throughput against TorchTitan", "paper": f"{claims[2]}; a public user report, not the paper: "
         f"{report} tokens/s per GPU ({user['hardware']}, {user['config']})",
         "ours": (ratio_text(ours, "x_torchtitan_compiled", "torchtitan-compiled") or NOT_MEASURED) + not_paper,
         "output": "throughput.md, fig_throughput.png",
         "status": "measured here on other configurations; the paper's and the user report's not run"},
        {"claim": "2 FP8", "paper": claims[1], "ours": "; ".join(fp8) or NOT_MEASURED,
         "output": "throughput.md", "status": "not reproduced: FP8 is not faster than BF16 here (H200, not B200)"
         if fp8 else NOT_MEASURED},
    ]  # fmt: skip


def fewest_turns(rows: list[tuple[str, dict]]) -> str:
    """On how many tasks pithtrain took the fewest turns, of those with all three frameworks."""
    full = [(n, t) for n, t in rows if len(t) == 3 and all(pd.notna(v) for v in t.values())]
    wins = [n for n, t in full if min(t, key=t.get) == "pithtrain"]
    return f"pithtrain fewest median turns on {len(wins)} of {len(full)} tasks" if full else ""


def ate_rows(b: Build) -> list[dict]:
    rows = []
    for cat, name in (("qa", "Q&A"), ("operate", "operate and profile"), ("feature", "new features")):
        tasks = [(p["name"], p.get("turns", {})) for p in b.paper["ate"]["tasks"] if p["category"] == cat]
        paper = b.paper["ate"]["qa"]["claim"] if cat == "qa" else fewest_turns(tasks)
        got = measured(read(b, f"ate_{cat}"))
        ours = NO_AGENT
        if len(got):
            turns = got.pivot_table(index="task", columns="framework", values="turns", aggfunc="first")
            ours = fewest_turns([(i, r.to_dict()) for i, r in turns.iterrows()]) or f"{len(got)} rows measured"
        status = "measured here" if len(got) else ours
        rows.append({"claim": f"3 ATE-Bench {name}: agent effort per task", "paper": paper, "ours": ours,
                     "output": f"ate_{cat}.md, fig_ate_turns.png", "status": status})  # fmt: skip
    return rows


def agent_rows(b: Build) -> list[dict]:
    abl, moba = read(b, "skills_ablation"), measured(read(b, "moba_token_breakdown").assign(status="measured"))
    abl_ours = NO_AGENT
    if len(abl) and pd.to_numeric(abl.get("turns_reduction"), errors="coerce").notna().any():
        abl_ours = f"largest turn reduction {pd.to_numeric(abl['turns_reduction'], errors='coerce').max():.0%}"
    edit = pd.to_numeric(moba["edit_output_tokens"], errors="coerce") if len(moba) else pd.Series(dtype=float)
    moba_ours = "; ".join(f"{f} {v:,.0f}" for f, v in zip(moba.get("framework", []), edit) if v == v) or NO_AGENT
    m = b.paper["moba"]
    edits = f"edit tokens pithtrain {m['edit_tokens']['pithtrain']:,}, the others (unlabelled) " + ", ".join(
        f"{v:,}" for v in m["edit_tokens_other_frameworks_unlabelled"]
    )
    return [
        {"claim": "4 skills ablation", "paper": b.paper["ablation"]["claim"], "ours": abl_ours,
         "output": "skills_ablation.md", "status": "measured here" if abl_ours != NO_AGENT else NO_AGENT},
        {"claim": "5 MoBA case study: where the tokens go", "paper": edits, "ours": moba_ours,
         "output": "moba_token_breakdown.md", "status": "measured here" if moba_ours != NO_AGENT else NO_AGENT},
    ]  # fmt: skip


def our_rows(b: Build) -> list[dict]:
    cells, cost = read(b, "validation_cells"), read(b, "agent_free_cost")
    ours = NOT_MEASURED
    if "outcome" in cells and len(cells):
        counts = ", ".join(f"{k} {v}" for k, v in cells["outcome"].value_counts().items())
        stale = int((cells["fresh"].astype(str) != "yes").sum()) if "fresh" in cells else 0
        ours = f"{len(cells)} cells: {counts}; {stale} stale (column fresh)"
    cost_ours = NOT_MEASURED
    if "cited_lines" in cost and pd.to_numeric(cost["cited_lines"], errors="coerce").notna().any():
        med = cost.assign(n=pd.to_numeric(cost["cited_lines"], errors="coerce")).groupby("framework")["n"].median()
        cost_ours = "median lines to cite per Q&A task: " + ", ".join(f"{k} {v:,.0f}" for k, v in med.items())
        stale = cost.get("fresh", pd.Series(dtype=str)).astype(str).ne("yes")
        cost_ours += f"; {int(stale.sum())} of {len(cost)} rows stale (column fresh)"
    none = "none: the authors' harness has no scripted checker"
    return [
        {"claim": "6 (ours) every checker validated: gold PASS, wrong answers FAIL", "paper": none, "ours": ours,
         "output": "validation_summary.md, fig_validation_matrix.png", "status": "measured here (ours only)"},
        {"claim": "6 (ours) agent-free cost of each Q&A task", "paper": "none", "ours": cost_ours,
         "output": "agent_free_cost.md", "status": "measured here (ours only)"},
    ]  # fmt: skip


def step_times(log: dict | None) -> dict[str, str]:
    """Result number -> the seconds its steps took in the last `make reproduce` / `make kick-tires` here."""
    if not log:
        return {}
    kind = "kick-tires" if log["kick_tires"] else "reproduce"
    out = {}
    for s in log["steps"]:
        n = s["result"].split(":")[0]
        if n.isdigit():
            out[n] = out.get(n, "") + f"{s['seconds']} s ({s['result'].split(': ', 1)[1]}, make {kind}) "
    return {n: t.strip() for n, t in out.items()}


def throughput_gpu_time(b: Build) -> str:
    """The GPU time the calls behind the throughput table took (sum of each run's wall time x its GPUs)."""
    prov = b.out / "throughput.provenance.json"
    paths = [REPO / i["path"] for i in json.loads(prov.read_text())["inputs"] if i["path"].endswith(".jsonl")]
    runs = [json.loads(line) for p in paths if p.exists() for line in p.read_text().splitlines() if line.strip()]
    gpu_s = sum(r.get("wall_s", 0) * r["gpus"] for r in runs)
    return f"{gpu_s / 60:.0f} GPU-min for the {len(paths)} calls shown" if runs else "not measured"


def claims_lines(b: Build, results: tuple, log: dict | None) -> list[str]:
    """The claims table: every row with the hardware and command of its result and the time it took here."""
    spec = {str(n): (needs, cmd) for n, _, _, needs, cmd, _ in results}
    times = step_times(log)
    times["2"] = f"{throughput_gpu_time(b)}; smoke: {times.get('2', 'not run here')}"
    rows = [code_size_row(b), *throughput_rows(b), *ate_rows(b), *agent_rows(b), *our_rows(b)]
    lines = ["| claim | paper's value | ours | output file | hardware | command | time here | status |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        n = r["claim"].split()[0]
        needs, cmd = spec[n]
        cells = [r["claim"], r["paper"], r["ours"], r["output"], needs, f"`{cmd}`", times.get(n, "not run here"),
                 r["status"]]  # fmt: skip
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return lines


def badge_lines(b: Build) -> list[str]:
    """What to run for each artifact badge, and what "Reproduced" costs (computed from the configs and the paper's
    reported GPU minutes, not typed)."""
    slurm = [c for c in tomllib.loads(CONFIGS.read_text()).values() if c.get("where") == "slurm"]
    nodes = sum(m.get("nodes", 1) for c in slurm for m in c["meshes"])
    tasks = sorted(b.tasks.glob("*/*/task.toml"))
    runs = 3 * sum(len(tomllib.loads(p.read_text()).get("frameworks", ())) for p in tasks)
    ablation = 3 * len([p for p in tasks if p.parent.parent.name in ("operate", "feature")])
    gpu_min = sum(v for p in b.paper["ate"]["tasks"] for v in p.get("gpu_min", {}).values())
    return [
        "## Badge guide",
        "",
        "- **Available**: the repository or `make archive` (a versioned tarball and its sha256; `ARCHIVE_STAMP`",
        "  names the commit, so every command below works without `.git`), with `LICENSE` and `CITATION.cff`.",
        "- **Functional** (a laptop, no GPU, no agent key): `make test`, then `make kick-tires` (its time is in the",
        "  last-run table below when it ran here). It ends with the comparison against these reference outputs.",
        "- **Reproduced**: throughput on one H200: `nox -s throughput -- --config qwen3-30b-a3b-8l --both-routings`",
        "  and the same with `qwen3-30b-a3b-4l` (the GPU time of the calls shown is in the claims table), then",
        "  `nox -s figures`: `throughput` compares within 5%. The paper's five configurations need "
        f"{len(slurm)} SLURM runs on {nodes} nodes of 8 H100 in all (GPU-hours not measured here). ATE-Bench:",
        f"  {runs} agent runs (`nox -s ate`: {len(tasks)} tasks on their frameworks, 3 repeats) and {ablation}",
        "  more for the ablation's no-skills arm (`nox -s ablation -- --agent claude-code`); by the paper's blog",
        f"  medians the operate and feature tasks alone hold {gpu_min * 3 / 60:.0f} GPU-hours over 3 repeats.",
        "",
    ]
