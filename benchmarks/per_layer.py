"""Time per transformer layer, per framework, from two configurations of one call that differ only in depth.

    python3 benchmarks/per_layer.py DIR_OR_JSONL...     # the throughput records of one GPU call

For every two configurations whose model tables are equal but for `num_hidden_layers` (qwen3-30b-a3b-4l and -8l),
and for every framework label, mesh and routing that ran both: with t(L) the median step time at L layers,
    per layer = (t(L2) - t(L1)) / (L2 - L1),   the rest = t(L1) - L1 x per layer
(the rest: embedding, head, loss and their optimizer work). Only records with status ok count. Prints one line per
pair and, where both ran, TorchTitan's per-layer time over pithtrain's (pithtrain: its fastest BF16 label).
"""

import json
import statistics
import sys
from pathlib import Path


def load_records(paths: list[Path]) -> list[dict]:
    files = [f for p in paths for f in (sorted(p.glob("*.jsonl")) if p.is_dir() else [p])]
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def _shape_without_depth(rec: dict) -> str:
    model = {k: v for k, v in rec["config_table"]["model"].items() if k != "num_hidden_layers"}
    return json.dumps([model, rec["seq_len"], rec["global_batch_size"], rec["micro_batch_size"]], sort_keys=True)


def per_layer_rows(records: list[dict]) -> list[dict]:
    """One row per (shape, framework label, mesh, routing) that ran at two depths or more: the shallowest and the
    deepest."""
    groups: dict[tuple, dict[int, float]] = {}
    for r in records:
        if r["status"] != "ok" or not r.get("step_times_s"):
            continue
        key = (_shape_without_depth(r), r["label"], json.dumps(r["mesh"], sort_keys=True), r["routing"])
        depth = r["config_table"]["model"]["num_hidden_layers"]
        groups.setdefault(key, {})[depth] = statistics.median(r["step_times_s"])
    rows = []
    for (shape, label, mesh, routing), by_depth in sorted(groups.items()):
        if len(by_depth) < 2:
            continue
        (l1, t1), (l2, t2) = min(by_depth.items()), max(by_depth.items())
        layer_s = (t2 - t1) / (l2 - l1)
        rows.append(
            {"shape": shape, "label": label, "mesh": mesh, "routing": routing, "depths": (l1, l2),
             "per_layer_ms": layer_s * 1e3, "rest_ms": (t1 - l1 * layer_s) * 1e3}
        )  # fmt: skip
    return rows


def report(rows: list[dict]) -> str:
    if not rows:
        return "per layer: no two depths of one shape ran ok in these records"
    lines = [f"{'per layer':20} {'depths':>6} {'ms/layer':>9} {'rest ms':>8}  mesh, routing"]
    for r in rows:
        depths = ",".join(str(d) for d in r["depths"])
        lines.append(
            f"{r['label']:20} {depths:>6} {r['per_layer_ms']:9.1f} {r['rest_ms']:8.1f}  {r['mesh']}, {r['routing']}"
        )
    for shape in sorted({r["shape"] for r in rows}):
        for mesh, routing in sorted({(r["mesh"], r["routing"]) for r in rows if r["shape"] == shape}):
            block = [r for r in rows if (r["shape"], r["mesh"], r["routing"]) == (shape, mesh, routing)]
            ours = [r["per_layer_ms"] for r in block if r["label"].startswith("pithtrain") and "fp8" not in r["label"]]
            theirs = [r["per_layer_ms"] for r in block if r["label"].startswith("torchtitan")]
            if ours and theirs:
                lines.append(f"per-layer TorchTitan/pithtrain {min(theirs) / min(ours):.2f}x ({mesh}, {routing})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    missing = [a for a in argv if not Path(a).exists()]
    if missing:
        print(f"per_layer: {missing[0]} does not exist; give the throughput records' folder or .jsonl files")
        return 2
    print(report(per_layer_rows(load_records([Path(a) for a in argv]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
