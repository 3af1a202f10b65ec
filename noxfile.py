"""Sessions: `tests` (pytest, fast tests unless `-- -m ""`), `lint` (ruff)."""

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
