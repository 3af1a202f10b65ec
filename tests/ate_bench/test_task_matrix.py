"""The real tasks' validation matrix: every checker against its gold, noop and wrong answers.

Q&A on all three frameworks, operate and feature on the smoke profile (the cells that cannot run on a
CPU are "not run", with their reasons). The torchtitan and megatron-core trees are the pinned PyPI sdists
(the trees the keys are written against), downloaded once into the harness's cache; a test that cannot
have them skips and says why. On failure the assertion shows the whole matrix.
"""

import fnmatch
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ate_bench.frameworks import FRAMEWORKS
from ate_bench.workspace import DEFAULT_CACHE_DIR, REPO_ROOT, NetworkError, pypi_download

KNOWN_MISSES = tomllib.loads((REPO_ROOT / "tasks" / "known_misses.toml").read_text())["miss"]


# Q&A checkers read text only; operate/feature golds train, so only the profile that runs on CPU.
PROFILE_ARGS = {"qa": [], "operate": ["--profiles", "smoke"], "feature": ["--profiles", "smoke"]}


# The newest blind Q&A set (its writers saw only the instructions and the trees), the honest measure of the keys.
NEWEST_SET = max(tomllib.loads((REPO_ROOT / "tasks" / "qa" / "blind_sets.toml").read_text()), key=lambda s: int(s[3:]))
# Every Q&A case but the older blind sets' answers (about 2,300 cells, each a sandboxed checker: over 20 minutes on
# 2 cores), which `make test-all` validates.
QA_FAST = ["gold", "noop", "other-task", "shifted", "stripped", "fabricated.md", "wrong-*.md", f"{NEWEST_SET}/*"]
# MoBA's gold, noop, other-task and hand-written wrong cases; its blind near-miss sets (a training run or six each:
# make test was 28 minutes here with them) run in `make test-all`.
FEATURE_FAST = ["gold", "noop", "other-task", "[!b]*"]


# The operate and feature golds train on CPU (minutes each on 2 cores). make test validates every Q&A task (all but
# the older blind sets), the three operate tasks whose smoke golds take about a minute, and MoBA (but its blind
# near-miss sets); Getting Started (its
# gold builds a 1.7 GB venv, 4 min here under load), the other three features (2-4 min each) and every blind Q&A set
# run in `make test-all` and `make reproduce`.
@pytest.mark.parametrize(
    "category, tasks, cases",
    [
        ("qa", "qa-*", QA_FAST),
        pytest.param("qa", "qa-*", ["*"], marks=pytest.mark.slow),
        ("operate", "operate-0[234]", ["*"]),
        pytest.param("operate", "operate-01", ["*"], marks=pytest.mark.slow),
        ("feature", "feature-01", FEATURE_FAST),
        pytest.param("feature", "feature-01", ["blind*"], marks=pytest.mark.slow),
        pytest.param("feature", "feature-0[234]", ["*"], marks=pytest.mark.slow),
    ],
)
def test_task_matrix(category, tasks, cases, tmp_path):
    if not (REPO_ROOT / "tasks" / category).is_dir():
        pytest.skip(f"tasks/{category} does not exist yet")
    for fw in FRAMEWORKS.values():
        if fw.pypi_requirement:
            try:
                pypi_download(fw, DEFAULT_CACHE_DIR)
            except NetworkError as e:
                pytest.skip(f"cannot download {fw.pypi_requirement}: {str(e).splitlines()[0]}")
    cmd = [sys.executable, "-m", "ate_bench", "validate", "--tasks", tasks, "--cases", *cases, "--source", "pypi"]
    cmd += [*PROFILE_ARGS[category], "--out", str(tmp_path / "out"), "--work-root", str(tmp_path / "work")]
    # Golds and provided scripts call `python`: the one running the tests (nox puts it first on PATH; a bare
    # `.nox/tests/bin/python -m pytest` would not).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=3600)
    records = list((tmp_path / "out").glob("*.json"))
    assert records, f"validate wrote no record (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-5000:]}"
    unexpected = {
        f"{c['task']} {c['framework']} {c['profile']} {c['case']}".replace("  ", " ")
        for c in json.loads(records[0].read_text())["cells"]
        if c["verdict"] != "not run" and c["verdict"] != c["expected"]
    }
    profiles = PROFILE_ARGS[category][1:] or [""]
    known = {
        m["cell"]
        for m in KNOWN_MISSES
        if fnmatch.fnmatchcase(m["cell"].split()[0], tasks)
        and (m["cell"].split()[2] if category != "qa" else "") in profiles
        and any(fnmatch.fnmatchcase(m["cell"].split()[-1], c) for c in cases)
    }
    assert unexpected == known, (
        f"unexpected cells {sorted(unexpected - known)}, known misses now as expected {sorted(known - unexpected)} "
        f"(tasks/known_misses.toml); validate exited {done.returncode}:\n{done.stdout}\n{done.stderr[-5000:]}"
    )
    assert done.returncode == 0, done.stdout  # known misses alone do not fail validate
