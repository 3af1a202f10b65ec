"""The Megatron-LM feature golds and near misses on a CPU, through tasks/feature/megatron_cpu_check.py.

Their task cells run on a GPU only (pretrain_gpt.py asserts CUDA); here each gold must PASS the CPU check (the op
against reference.py, a tiny GPTModel built from pretrain_gpt.py's arguments calling it as the seam rules ask, never
with the feature off) and each near miss (`wrong/megatron-lm/*.sh`) must FAIL it. The workspace is the pinned
Megatron-LM from the harness's git mode (its cache's mirror or carried archive); a machine without either, and no
network to fetch the commit, skips and says why.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from ate_bench.workspace import REPO_ROOT

FEATURE = REPO_ROOT / "tasks" / "feature"
CASES = [
    (task.name, script.stem if script.name != "solve.sh" else "gold")
    for task in sorted(FEATURE.glob("0*"))
    for script in [task / "gold" / "megatron-lm" / "solve.sh", *sorted((task / "wrong" / "megatron-lm").glob("*.sh"))]
]


@pytest.mark.slow
@pytest.mark.parametrize("task, case", CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_megatron_feature_cpu_check(task, case, megatron_pin, tmp_path):
    ws = tmp_path / "ws"
    task_dir = FEATURE / task
    subprocess.run(["cp", "-a", f"{megatron_pin}/.", str(ws)], check=True)
    subprocess.run(["cp", "-rL", f"{task_dir}/prepare/gpu1/megatron-lm/.", str(ws)], check=True)  # verify.sh & co.
    folder = task_dir / ("gold" if case == "gold" else "wrong") / "megatron-lm"
    script = folder / ("solve.sh" if case == "gold" else f"{case}.sh")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GOLD_DIR": str(folder), "ATE_PROFILE": "gpu1"}
    applied = subprocess.run(["bash", str(script)], cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    checker = FEATURE / "megatron_cpu_check.py"
    done = subprocess.run(
        [sys.executable, str(checker), str(task_dir), str(ws)], capture_output=True, text=True, timeout=900
    )
    verdict = "PASS" if "PASS" in done.stdout.split() and done.returncode == 0 else f"exit {done.returncode}"
    verdict = "FAIL" if "FAIL" in done.stdout.split() and done.returncode == 1 else verdict
    expected = "PASS" if case == "gold" else "FAIL"
    assert verdict == expected, (
        f"{task} {case}: expected {expected}, got {verdict}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
