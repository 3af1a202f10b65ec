"""A source archive (`make archive`, or `git archive` of HEAD) names its commit without .git."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    dest = tmp_path_factory.mktemp("archive")
    tar = dest / "src.tar"
    _git("archive", "--format=tar", f"--output={tar}", "HEAD")
    subprocess.run(["tar", "-xf", str(tar), "-C", str(dest)], check=True)
    tar.unlink()
    return dest


def _py(root: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )


def test_archive_stamp_names_head(unpacked):
    done = _py(unpacked, "from ate_bench.source_stamp import tree_commit; print(*tree_commit(), sep='|')")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{_git('rev-parse', 'HEAD')}|archive stamp"


def test_pithtrain_workspace_from_archive(unpacked, tmp_path):
    code = (
        "from pathlib import Path; from ate_bench.workspace import materialize; "
        f"ws = materialize('pithtrain', Path({str(tmp_path / 'ws')!r})); print(ws.version); print(*ws.notes)"
    )
    done = _py(unpacked, code)
    assert done.returncode == 0, done.stderr
    version, notes = done.stdout.splitlines()[:2]
    assert version == _git("rev-parse", "HEAD")
    assert "source archive" in notes
    assert (tmp_path / "ws" / "pithtrain" / "__main__.py").is_file()
    assert not (tmp_path / "ws" / "tasks").exists() and not (tmp_path / "ws" / "ate_bench").exists()


def test_unexpanded_stamp_is_one_clear_error(tmp_path):
    (tmp_path / "ARCHIVE_STAMP").write_text((REPO / "ARCHIVE_STAMP").read_text())
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from ate_bench.source_stamp import tree_commit, NoProvenance\n"
        "try:\n    tree_commit(Path('.'))\nexcept NoProvenance as e:\n    print(e)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(REPO)], cwd=tmp_path, capture_output=True, text=True)
    assert "is not expanded" in done.stdout and "make archive" in done.stdout, done.stdout + done.stderr
