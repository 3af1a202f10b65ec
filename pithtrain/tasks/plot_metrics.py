"""Plot runs' metrics.jsonl: loss, learning rate, tokens/s and peak memory over steps, several runs overlaid.

Drawn with seaborn (an optional package: pip install seaborn); the image is written with matplotlib's Agg
backend, so no display is needed.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from pithtrain.config import ConfigError
from pithtrain.modules.data import DataError

PANELS = [
    ("loss", "loss"),
    ("lr", "learning rate"),
    ("tokens_per_s", "tokens/s"),
    ("peak_mem_gib", "peak memory (GiB)"),
]


@dataclass
class PlotMetricsCfg:
    run_dirs: list[str]
    """Run directories (each a `run_dir` of `pithtrain train`, holding metrics.jsonl)."""
    output: str = ""
    """Image to write (.png, .pdf, .svg); empty: metrics.png in the first run directory."""


def read_metrics(run_dir: str) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise DataError(f"'{run_dir}' has no metrics.jsonl: pass run directories written by `pithtrain train`.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(
            f"'{path}' is not UTF-8 text (byte {e.start} is {e.object[e.start : e.start + 1]!r}): it is not a "
            f"metrics.jsonl written by `pithtrain train`. Pass the run directory of a training run."
        ) from e
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError as e:
            raise DataError(f"{path}:{n} is not a JSON line ({e}); remove it (a run killed mid-write).") from e
    if not records:
        raise DataError(f"'{path}' holds no steps (empty): nothing to plot. Plot it once the run has logged a step.")
    return records


def launch(cfg: PlotMetricsCfg) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import seaborn as sns
    except ImportError as e:
        raise ConfigError(
            f"`pithtrain plot` draws with seaborn, which is not installed ({e}): pip install seaborn"
        ) from e
    runs = {d: read_metrics(d) for d in cfg.run_dirs}
    output = Path(cfg.output or Path(cfg.run_dirs[0]) / "metrics.png")
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, (key, label) in zip(axes.flat, PANELS):
        rows = [(r["step"], r[key], name) for name, records in runs.items() for r in records if key in r]
        if rows:
            steps, values, names = zip(*rows)
            sns.lineplot(x=list(steps), y=list(values), hue=list(names), ax=ax, legend=ax is axes.flat[0])
        ax.set(title=label, xlabel="step", ylabel=label)
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)
    print(f"wrote {output}", flush=True)
    return output
