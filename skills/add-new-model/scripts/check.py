"""The gates of porting a model family, run for one family; prints PASS or FAIL: <gate>: <reason>.

    python skills/add-new-model/scripts/check.py FAMILY [--gate contract|hf|distributed|export ...]

Gates, in order (all by default; the first that fails ends the check):
  contract     tests/test_model_contract.py -k FAMILY: the five-stage split equals `reference_forward`
               (loss and every gradient), experts in the autocast dtype.
  hf           tests/test_FAMILY.py -k hf_parity: logits and loss of a tiny random `transformers` model, and the
               import -> export -> import round trip through safetensors.
  distributed  tests/test_distributed.py on the PP2xEP2 mesh and the first mesh with CP, against one process
               (several gloo processes; about a minute on 2 cores).
  export       the CLI round trip on the family's examples/*tiny*.toml: train one step, `convert
               pithtrain-to-hf`, `convert hf-to-pithtrain`, and every tensor comes back equal.
A pytest gate passes only when it selected at least one test and none failed, errored or was skipped.
"""

import argparse
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
GATES = ("contract", "hf", "distributed", "export")


def pytest_gate(args: list[str], what: str) -> str | None:
    """Run pytest on `args` from the repository root; None when it passed, else the reason."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if not report.exists():
            return f"pytest did not run ({' '.join(args)}): {done.stdout[-300:]}{done.stderr[-300:]}"
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    if counts["tests"] == 0:
        return f"no test selected: {what}"
    if counts["failures"] or counts["errors"] or counts["skipped"]:
        tail = " | ".join(done.stdout.strip().splitlines()[-3:])
        return f"{counts} in `pytest {' '.join(args)}`: {tail}"
    return None


def distributed_ids(family: str) -> list[str]:
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "", "-p", "no:cacheprovider",
         "tests/test_distributed.py", "-k", f"test_mesh_matches_single_process and {family}-"],
        cwd=REPO, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    ids = [i for i in listed if i.startswith("tests/") and f"[{family}-" in i]
    pp_ep = [i for i in ids if i.endswith(f"[{family}-PP2xEP2]")]
    cp = [i for i in ids if "CP" in i.split("[")[1]]
    return pp_ep + cp[:1]


def tiny_example(family: str) -> Path | None:
    for path in sorted(REPO.glob("examples/*tiny*.toml")):
        if tomllib.loads(path.read_text()).get("model", {}).get("family") == family:
            return path
    return None


def export_gate(family: str) -> str | None:
    import torch

    from pithtrain.config import load_dataclass
    from pithtrain.models import model_family
    from pithtrain.modules.checkpoint import load_checkpoint, read_meta

    example = tiny_example(family)
    if example is None:
        return f'no examples/*tiny*.toml with model.family = "{family}": add one (a model that trains on CPU)'
    with tempfile.TemporaryDirectory() as tmp:
        py = [sys.executable, "-m", "pithtrain"]
        steps = [
            [*py, "train", str(example), "--set", f'run_dir="{tmp}/run"', "--set", "training.max_steps=1",
             "--set", 'training.device="cpu"'],
            [*py, "convert", "pithtrain-to-hf", "--source", f"{tmp}/run/checkpoints", "--output", f"{tmp}/hf",
             "--dtype", "float32"],
            [*py, "convert", "hf-to-pithtrain", "--source", f"{tmp}/hf", "--output", f"{tmp}/back"],
        ]  # fmt: skip
        for cmd in steps:
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if done.returncode:
                return f"`{' '.join(cmd[2:5])}` exited {done.returncode}: {done.stderr.strip()[-300:]}"
        family_ = model_family(family)
        models = []
        for source in (f"{tmp}/run/checkpoints", f"{tmp}/back"):
            meta = read_meta(source)
            model = family_.model_class(load_dataclass(family_.cfg_class, meta["model"]))
            load_checkpoint(meta["path"], model)
            models.append(model.state_dict())
        for name, tensor in models[0].items():
            if name not in models[1] or not torch.equal(tensor, models[1][name]):
                return f"{name} differs after pithtrain -> HF -> pithtrain"
        if models[0].keys() != models[1].keys():
            return f"tensor names differ: {sorted(models[0].keys() ^ models[1].keys())[:3]}"
    return None


def run_gate(gate: str, family: str) -> str | None:
    if gate == "contract":
        return pytest_gate(
            ["tests/test_model_contract.py", "-k", family],
            f'add pytest.param(ModelClass, CFG, id="{family}") to FAMILIES in tests/test_model_contract.py',
        )
    if gate == "hf":
        test_file = REPO / "tests" / f"test_{family}.py"
        if not test_file.exists():
            return f"{test_file.relative_to(REPO)} does not exist: copy a sibling's test_hf_parity_import_export"
        return pytest_gate([str(test_file.relative_to(REPO)), "-k", "hf_parity"], f"no hf_parity test in {test_file}")
    if gate == "distributed":
        ids = distributed_ids(family)
        if len(ids) < 2:
            return (
                f'tests/test_distributed.py has {ids} for {family}: add ({family!r}, "PP2xEP2") and a CP mesh to CASES'
            )
        return pytest_gate(["-m", "", *ids], "")
    if gate == "export":
        return export_gate(family)
    raise AssertionError(gate)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", help='model.family of the port, e.g. "qwen3_moe"')
    ap.add_argument("--gate", action="append", choices=GATES, help="run only these gates (repeatable)")
    args = ap.parse_args()
    for gate in args.gate or GATES:
        reason = run_gate(gate, args.family)
        if reason:
            print(f"FAIL: {gate}: {reason}")
            return 1
        print(f"{gate}: passed")
    print(f"PASS ({args.family}: {', '.join(args.gate or GATES)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
