"""Result 7, checkpoint stall: how long a save stops training, synchronous against asynchronous (staged to pinned host
memory, written in the background), from `results/checkpoint_stall/*.json` (benchmarks/checkpoint_stall.py, run by
`CKPT=1 bash benchmarks/gpu_run.sh`). One row per record: the synchronous save's time, and per asynchronous save
the stall, i.e. the time it blocked the loop plus the extra step time while its write ran; the one-time allocation
of the pinned host buffer is its own column (it slows the first steps once, it is not a save's stall).
"""

import json

import pandas as pd

from paper.rebuild.common import MEASURED, Build, nothing_measured

GOAL_S = 2.0  # issue 29: a save stops training for at most 2 s at the 1.3B size
COLUMNS = ["commit", "date", "hardware", "parameters_b", "checkpoint_gb", "sync_save_s", "async_stalls_s",
           "async_max_stall_s", "buffer_allocation_extra_s", "goal_s", "command"]  # fmt: skip


def rows(records: list[dict]) -> pd.DataFrame:
    out = []
    for r in records:
        stalls = [s["stall_s"] for s in r["async_saves"]]
        out.append({
            "commit": r["commit"][:10], "date": r["date"], "hardware": r["hardware"],
            "parameters_b": round(r["parameters"] / 1e9, 2), "checkpoint_gb": round(r["checkpoint_bytes"] / 1e9, 1),
            "sync_save_s": round(r["sync_save_s"], 2), "async_stalls_s": " ".join(f"{s:.2f}" for s in stalls),
            "async_max_stall_s": round(max(stalls), 2),
            "buffer_allocation_extra_s": round(r["host_buffer_allocation"]["extra_step_time_s"], 1),
            "goal_s": GOAL_S, "command": r["command"],
        })  # fmt: skip
    return pd.DataFrame(out, columns=COLUMNS)


def build(b: Build) -> None:
    import matplotlib.pyplot as plt

    paths = sorted((b.results / "checkpoint_stall").glob("*.json"))
    table = rows([json.loads(p.read_text()) for p in paths])
    notes = [
        "stall: the time a save blocked the training loop plus the extra step time while its background write ran",
        "buffer_allocation_extra_s: the one-time pinned host buffer, allocated in the background before the first "
        "asynchronous save, slowing the steps around it once",
    ]
    if len(table):
        status = MEASURED
    else:
        status = "not measured: no GPU record; `CKPT=1 bash benchmarks/gpu_run.sh` on one H200 writes one"
        table = pd.DataFrame([{"commit": "(none)", "sync_save_s": status}]).reindex(columns=COLUMNS)
    b.table("checkpoint_stall", table, paths, status, "Checkpoint stall: synchronous and asynchronous saves", notes)

    fig, ax = plt.subplots(figsize=(6, 3))
    if status == MEASURED:
        last = table.iloc[-1]
        stalls = [float(s) for s in last["async_stalls_s"].split()]
        labels = ["synchronous"] + [f"async save {i + 1}" for i in range(len(stalls))]
        values = [last["sync_save_s"], *stalls]
        bars = ax.bar(labels, values, color=["#999999"] + ["#e07b39"] * len(stalls))
        ax.bar_label(bars, fmt="%.2f s", fontsize=7)
        ax.axhline(GOAL_S, color="firebrick", linestyle="--", linewidth=1, label=f"goal: {GOAL_S:.0f} s")
        ax.set_yscale("log")
        ax.set_ylabel("training stopped (s, log)")
        ax.set_title(f"{last['parameters_b']}B parameters, {last['checkpoint_gb']} GB, {last['commit']}", fontsize=8)
        ax.legend(fontsize=7)
    else:
        nothing_measured(ax, status)
    b.figure("checkpoint_stall", fig, paths, status, "Checkpoint stall figure: training stopped per save", notes)
    plt.close("all")
