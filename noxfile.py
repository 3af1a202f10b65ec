"""Sessions: `tests` (pytest, fast tests unless `-- -m ""`), `lint` (ruff), `throughput` (GPU benchmark)."""

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"

# The CPU build of torch lies on the CPU machines' local disk; an unpinned torch would pull a CUDA build.
TORCH_CPU = "torch==2.13.0"


@nox.session
def tests(session):
    session.install(TORCH_CPU)
    session.install("-e", ".[test]")
    args = session.posargs or ["-m", "not slow"]
    session.run("pytest", "-q", *args, env={"OMP_NUM_THREADS": "1"})


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(venv_backend="none", default=False)  # needs a GPU: never part of a bare `nox`
def throughput(session):
    """pithtrain against TorchTitan and megatron-core on a GPU host: `nox -s throughput -- --config NAME [...]`.

    Runs in the calling environment, which must hold a CUDA torch (and TorchTitan 0.2.2 and megatron-core 0.19.2
    for the baselines; a missing one is recorded as skipped):
    a fresh venv would pull the CPU pin above. The GPU machine has no nox: there, run the script itself
    (benchmarks/gpu_run.sh does). Options and method: benchmarks/throughput.py --help, benchmarks/NOTES.md.
    """
    session.run("python3", "benchmarks/throughput.py", *(session.posargs or ["--config", "qwen3-30b-a3b-4l"]))
