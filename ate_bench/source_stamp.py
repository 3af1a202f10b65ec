"""Which commit this tree was made from: git in a checkout, else the stamp `git archive` writes into ARCHIVE_STAMP.

Reviewers often get a source archive (`make archive`), not a clone. `.gitattributes` marks ARCHIVE_STAMP
`export-subst`, so in an archive its placeholders hold the commit and its date; in a checkout they stay
unexpanded and git answers instead.
"""

import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
STAMP_FILE = "ARCHIVE_STAMP"


class NoProvenance(ValueError):
    """Neither git nor an expanded ARCHIVE_STAMP says which commit this tree is (a bad input: exit 2)."""


def is_checkout(repo: Path = REPO_ROOT) -> bool:
    done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=repo, capture_output=True, text=True)
    return done.returncode == 0 and Path(done.stdout.strip()).resolve() == repo.resolve()


def archive_commit(repo: Path = REPO_ROOT) -> str:
    """The commit named by an expanded ARCHIVE_STAMP, or NoProvenance saying what is missing."""
    path = repo / STAMP_FILE
    try:
        fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    except OSError as e:
        fix = "run from a git clone or from an archive made by `make archive`"
        raise NoProvenance(f"{path}: {e.strerror}; {fix}") from e
    commit = fields.get("commit", "")
    if len(commit) != 40 or not all(c in "0123456789abcdef" for c in commit):
        raise NoProvenance(
            f"{path}: commit {commit!r} is not expanded (this tree is neither a git checkout nor a `git archive`); "
            "run from a git clone or from an archive made by `make archive`"
        )
    return commit


def tree_commit(repo: Path = REPO_ROOT) -> tuple[str, str]:
    """(commit, where it came from: "git" or "archive stamp")."""
    if is_checkout(repo):
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
        return head.stdout.strip(), "git"
    return archive_commit(repo), "archive stamp"
