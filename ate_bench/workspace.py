"""Materialize a fresh framework workspace, strip or keep agent instruction files, diff it at the end.

Every mode ends in the same shape: a plain tree (no upstream history) with a one-commit git repository
made by the harness, so the agent sees the same kind of checkout on every framework and the run's
diff is `git` against that baseline commit. The tree hash identifies the framework source that was
used: sha256 over each file's path, executable bit and content sha256, computed before anything is
stripped or added.
"""

import hashlib
import lzma
import os
import re
import shutil
import stat as statmod
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ate_bench.frameworks import FRAMEWORKS, SOURCE_MODES, FrameworkSource
from ate_bench.source_stamp import archive_commit, is_checkout

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "pithtrain-ate"
REPO_ROOT = Path(__file__).resolve().parent.parent

# What `--no-skills` removes, the same for every framework (the skills ablation's switch): skills trees,
# the agents' skill folders, and the skills section of the instruction files (the rest of them stays).
SKILL_FILE = "SKILL.md"  # a directory named `skills` holding one of these is a skills tree
AGENT_SKILL_DIRS = (".claude/skills", ".codex/skills", ".agents/skills")
AGENT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
SKILLS_HEADING = re.compile(r"^## Skills\b")
NEXT_SECTION = re.compile(r"^#{1,2} ")
# Uncommitted changes here do not make the pithtrain workspace differ from HEAD's (run records land here).
DIRTY_IGNORED = ("results",)

# pip's words for "the index could not be reached" (as opposed to "no such version").
_NETWORK_MARKERS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ProxyError",
    "Connection refused",
)

# Diff limits: a workspace may hold checkpoints and traces; the record keeps text, not data.
_MAX_NEW_FILE_BYTES = 64 * 1024
_MAX_LISTED_NEW_FILES = 200
_MAX_DIFF_CHARS = 2_000_000


class MaterializeError(RuntimeError):
    """The framework source could not be obtained or did not match its pin."""


class NetworkError(MaterializeError):
    """The git host or package index could not be reached."""


@dataclass
class Workspace:
    path: Path
    framework: str
    mode: str
    """`repo` (pithtrain via git archive), `git` (upstream commit) or `pypi` (sdist)."""
    version: str
    """Full commit hash, or `name==version`."""
    tree_sha256: str
    skills: str
    """`kept` or `stripped`."""
    stripped: list[str] = field(default_factory=list)
    """What --no-skills removed, one entry per tree, link or section."""
    dirty_paths: list[str] = field(default_factory=list)
    """pithtrain: uncommitted paths of this repository (results/ ignored), which the workspace lacks."""
    prepared: list[str] = field(default_factory=list)
    source: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skills_overlay: list[str] = field(default_factory=list)
    """This repository's skills copied into skills/ (with a .claude/skills link) before the baseline commit."""


def tree_sha256(root: Path, cache: dict[str, tuple[tuple, str]] | None = None) -> str:
    """sha256 over (path, executable bit or link target, content sha256) of every file, `.git` left out.

    `cache` (path -> (stat key, content sha256)), kept between calls on one tree, rehashes only files
    whose size, mtime or inode changed, as git's index does: the same hash, much faster on a big tree.
    """
    base = str(root).rstrip("/") + "/"
    rels: list[str] = []  # plain strings: pathlib per file made this the matrix's hot spot
    for dirpath, dirnames, filenames in os.walk(root):  # links to directories are listed, not entered
        dirnames[:] = [d for d in dirnames if d != ".git"]
        here = os.path.join(dirpath, "")[len(base) :]
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        rels += [here + name for name in [*filenames, *linked] if name != ".git"]
    h = hashlib.sha256()
    for rel in sorted(rels, key=lambda r: r.split("/")):  # pathlib's order of parts, as the hash always had
        full = base + rel
        st = os.lstat(full)
        if statmod.S_ISLNK(st.st_mode):
            h.update(f"{rel}\0l\0{os.readlink(full)}\n".encode())
        elif statmod.S_ISREG(st.st_mode):
            mode = "x" if os.access(full, os.X_OK) else "-"
            if cache is None:
                digest = file_sha256(Path(full))
            else:
                key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
                if rel not in cache or cache[rel][0] != key:
                    cache[rel] = (key, file_sha256(Path(full)))
                digest = cache[rel][1]
            h.update(f"{rel}\0{mode}\0{digest}\n".encode())
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _git(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise MaterializeError(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode(errors="replace")


def _extract_tar(archive: Path, dest: Path, strip_top: bool, exclude: tuple[str, ...] = ()) -> None:
    """Extract with tarfile's `data` filter (no absolute paths, no links out of dest)."""

    def keep(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        parts = Path(member.name).parts
        if strip_top:
            parts = parts[1:]
        if not parts:
            return None
        name = "/".join(parts)
        if any(name == ex or name.startswith(ex + "/") for ex in exclude):
            return None
        return tarfile.data_filter(member.replace(name=name, deep=False), path)

    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter=keep)


def repo_state() -> tuple[str, list[str]]:
    """(commit, paths with uncommitted changes) of this repository, results/ ignored. From a source archive
    (no .git) the commit is the archive's stamp and no path can be told dirty."""
    if not is_checkout(REPO_ROOT):
        return archive_commit(REPO_ROOT), []
    commit = _git("rev-parse", "HEAD", cwd=REPO_ROOT).strip()
    excludes = [f":(exclude){p}" for p in DIRTY_IGNORED]
    status = _git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".", *excludes, cwd=REPO_ROOT)
    entries = status.split("\0")
    dirty, i = [], 0
    while i < len(entries):
        e = entries[i]
        if e:
            dirty.append(e[3:])
            if e[0] in "RC":  # a rename's source path follows as its own entry
                i += 1
        i += 1
    return commit, sorted(dirty)


def _from_repo(fw: FrameworkSource, dest: Path, ws: Workspace, at_commit: str = "") -> None:
    """This repository at HEAD, or at `at_commit` (a tree that answers were written against)."""
    if at_commit:
        commit = _git("rev-parse", "--verify", f"{at_commit}^{{commit}}", cwd=REPO_ROOT).strip()
        ws.notes.append(f"the tree of commit {commit}, not HEAD (asked for by the caller)")
    else:
        commit, ws.dirty_paths = repo_state()
    if ws.dirty_paths:
        ws.notes.append(
            f"this repository has {len(ws.dirty_paths)} uncommitted path(s) (listed in dirty_paths); "
            f"the workspace holds HEAD {commit} only"
        )
    if is_checkout(REPO_ROOT):
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "head.tar"
            _git("archive", "--format=tar", f"--output={archive}", commit, cwd=REPO_ROOT)
            _extract_tar(archive, dest, strip_top=False, exclude=fw.exclude)
    else:
        _copy_archive_tree(dest, exclude=fw.exclude)
        ws.notes.append(f"source archive (no .git): the tree as unpacked, stamped commit {commit}")
    ws.mode, ws.version = "repo", commit
    ws.source = {"repo": str(REPO_ROOT), "commit": commit, "excluded": ", ".join(fw.exclude)}


def _git_cache_has(clone: Path, commit: str) -> bool:
    try:
        return clone.is_dir() and bool(_git("rev-parse", "--verify", f"{commit}^{{commit}}", cwd=clone))
    except MaterializeError:
        return False


def _carried_archive(cache_dir: Path, fw: FrameworkSource) -> Path | None:
    """A `git archive` of the pinned commit carried to a machine with no network (tasks/megatron_pin.sh), if any."""
    archive = cache_dir / "git" / f"{fw.name}-{fw.git_commit}.tar.xz"
    return archive if archive.is_file() else None


def pinned_git_source(framework: str, cache_dir: Path) -> Path | None:
    """Where git mode reads `framework`'s pinned commit with no network: the cache's mirror if it holds the commit,
    else a carried archive of it, else None."""
    fw = FRAMEWORKS[framework]
    clone = cache_dir / "git" / f"{fw.name}.git"
    return clone if _git_cache_has(clone, fw.git_commit) else _carried_archive(cache_dir, fw)


def resolve_mode(framework: str, mode: str, cache_dir: Path) -> str:
    """`repo` for pithtrain; for the others `git` or `pypi`, `auto` choosing git when it can be had."""
    fw = FRAMEWORKS[framework]
    if framework == "pithtrain":
        return "repo"
    if mode != "auto":
        return mode
    return "git" if pinned_git_source(framework, cache_dir) or _git_reachable(fw.git_url) else "pypi"


def _git_reachable(url: str) -> bool:
    try:
        _git("ls-remote", "--exit-code", url, "HEAD", timeout=30)
    except (MaterializeError, subprocess.TimeoutExpired):
        return False
    return True


def _from_git(fw: FrameworkSource, dest: Path, cache_dir: Path, ws: Workspace) -> None:
    clone = cache_dir / "git" / f"{fw.name}.git"
    carried = _carried_archive(cache_dir, fw)
    if carried and not _git_cache_has(clone, fw.git_commit):
        _from_carried_archive(fw, carried, dest, ws)
        return
    if not _git_cache_has(clone, fw.git_commit):
        try:
            if clone.is_dir():
                _git("fetch", "--quiet", "origin", cwd=clone, timeout=3600)
            else:
                clone.parent.mkdir(parents=True, exist_ok=True)
                _git("clone", "--bare", "--quiet", fw.git_url, str(clone), timeout=3600)
        except (MaterializeError, subprocess.TimeoutExpired) as e:
            raise NetworkError(f"{fw.name}: cannot fetch {fw.git_url}: {e}") from e
    commit = _git("rev-parse", "--verify", f"{fw.git_commit}^{{commit}}", cwd=clone).strip()
    assert commit.startswith(fw.git_commit), (commit, fw.git_commit)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "src.tar"
        _git("archive", "--format=tar", f"--output={archive}", commit, cwd=clone)
        _extract_tar(archive, dest, strip_top=False)
    ws.mode, ws.version = "git", commit
    ws.source = {"git_url": fw.git_url, "commit": commit}


def _from_carried_archive(fw: FrameworkSource, archive: Path, dest: Path, ws: Workspace) -> None:
    """The pinned commit's tree from a carried `git archive`, whose pax header names the commit; the paths it leaves
    out (the run needs none of them) are listed beside it and go into the record."""
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "src.tar"
        with lzma.open(archive) as f_in, open(tar, "wb") as f_out:
            shutil.copyfileobj(f_in, f_out)
        with open(tar, "rb") as f:
            named = subprocess.run(["git", "get-tar-commit-id"], stdin=f, capture_output=True, text=True)
        commit = named.stdout.strip()
        if not commit.startswith(fw.git_commit):
            raise MaterializeError(f"{archive} is not a git archive of {fw.name} {fw.git_commit} (it names '{commit}')")
        _extract_tar(tar, dest, strip_top=False)
    left_out_file = archive.with_name(archive.name.removesuffix(".tar.xz") + ".left-out")
    left_out = left_out_file.read_text().split() if left_out_file.is_file() else []
    ws.mode, ws.version = "git", commit
    ws.source = {"git_url": fw.git_url, "commit": commit, "archive": archive.name, "left_out": ", ".join(left_out)}
    ws.notes.append(f"carried archive of {commit[:12]} ({archive.name}), without: {', '.join(left_out) or 'nothing'}")


def pypi_download(fw: FrameworkSource, cache_dir: Path) -> Path:
    """The pinned sdist, from the cache or through pip (which picks its configured index)."""
    cached = cache_dir / "pypi" / fw.pypi_filename
    if cached.is_file() and file_sha256(cached) == fw.pypi_sha256:
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--progress-bar", "off"]
        cmd += ["--ignore-requires-python", "--disable-pip-version-check", "-d", tmp, fw.pypi_requirement]
        print(f"ate_bench: downloading {fw.pypi_requirement} (sdist, once; cached in {cached.parent})", file=sys.stderr)
        started = time.monotonic()
        # pip's own lines (Collecting, Downloading <size>, Saved) pass through as they come: a slow index shows.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            print(f"  pip: {line.rstrip()}", file=sys.stderr, flush=True)
        try:
            returncode = proc.wait(timeout=1800)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise NetworkError(f"pip download {fw.pypi_requirement} ran past 1800 s") from None
        log = "".join(lines)
        if returncode != 0:
            kind = NetworkError if any(m in log for m in _NETWORK_MARKERS) else MaterializeError
            raise kind(f"pip download {fw.pypi_requirement} failed:\n{log[-3000:]}")
        got = Path(tmp) / fw.pypi_filename
        if not got.is_file():
            raise MaterializeError(f"pip download {fw.pypi_requirement} did not produce {fw.pypi_filename}")
        digest = file_sha256(got)
        if digest != fw.pypi_sha256:
            raise MaterializeError(f"{fw.pypi_filename}: sha256 {digest} does not match the pin {fw.pypi_sha256}")
        shutil.move(got, cached)
        size = cached.stat().st_size / 1e6
        print(f"ate_bench: {fw.pypi_filename}: {size:.1f} MB in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return cached


def _from_pypi(fw: FrameworkSource, dest: Path, cache_dir: Path, ws: Workspace) -> None:
    sdist = pypi_download(fw, cache_dir)
    _extract_tar(sdist, dest, strip_top=True)
    ws.mode, ws.version = "pypi", fw.pypi_requirement
    ws.source = {"sdist": fw.pypi_filename, "sha256": fw.pypi_sha256, "lacks": fw.pypi_lacks}
    ws.notes.append(f"PyPI mode: {fw.pypi_lacks}")


# Made by using the archive, never part of it: left out of a workspace copied from an unpacked source archive.
_ARCHIVE_LOCAL = (".venv", ".nox", ".agents", "runs", "dist", ".git")


def _copy_archive_tree(dest: Path, exclude: tuple[str, ...]) -> None:
    """An unpacked source archive's files, as `git archive` would have given them, minus `exclude`."""
    skip = set(exclude) | set(_ARCHIVE_LOCAL)

    def ignore(folder: str, names: list[str]) -> list[str]:
        rel = Path(folder).relative_to(REPO_ROOT)
        return [n for n in names if (rel / n).as_posix() in skip or n == "__pycache__"]

    shutil.copytree(REPO_ROOT, dest, symlinks=True, ignore=ignore, dirs_exist_ok=True)


def _without_skills_section(text: str) -> tuple[str, tuple[int, int] | None]:
    """`text` minus its `## Skills` section (heading to the next `#`/`##` heading outside a code fence)."""
    lines = text.splitlines(keepends=True)
    start, fenced = None, False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            continue
        elif start is None and SKILLS_HEADING.match(line):
            start = i
        elif start is not None and NEXT_SECTION.match(line):
            return "".join(lines[:start] + lines[i:]), (start + 1, i)
    if start is None:
        return text, None
    return "".join(lines[:start]), (start + 1, len(lines))


def _is_agent_skill_dir(relname: str) -> bool:
    return any(relname == d or relname.endswith("/" + d) for d in AGENT_SKILL_DIRS)


def strip_skills(root: Path) -> list[str]:
    """Remove skills trees, `.claude/skills`-style folders or links, and the `## Skills` sections of
    AGENTS.md/CLAUDE.md; return one entry per thing removed."""
    removed: list[str] = []
    doomed: list[Path] = []
    # os.walk lists a link to a directory among dirnames (a dangling one among filenames) and does not enter it.
    for dirpath, dirnames, filenames in os.walk(root):
        here, rel = Path(dirpath), Path(dirpath).relative_to(root)
        if ".git" in rel.parts:
            dirnames[:] = []
            continue
        for name in list(dirnames):
            path = here / name
            if _is_agent_skill_dir((rel / name).as_posix()) or (
                name == "skills" and not path.is_symlink() and any(path.rglob(SKILL_FILE))
            ):
                doomed.append(path)
                dirnames.remove(name)
        for name in filenames:
            path, relname = here / name, (rel / name).as_posix()
            if path.is_symlink() and _is_agent_skill_dir(relname):
                doomed.append(path)
            elif name in AGENT_FILE_NAMES and path.is_file() and not path.is_symlink():
                text, span = _without_skills_section(path.read_text(errors="replace"))
                if span is not None:
                    path.write_text(text)
                    removed.append(f"{relname}: section '## Skills' (lines {span[0]}-{span[1]})")
    for path in doomed:
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            removed.append(f"{rel} (link to {os.readlink(path)})")
            path.unlink()
        else:
            removed.append(f"{rel}/ (directory)")
            shutil.rmtree(path)
    return sorted(removed)


def materialize(
    framework: str,
    dest: Path,
    mode: str = "auto",
    skills: bool = True,
    prepare_dir: Path | None = None,
    cache_dir: Path = DEFAULT_CACHE_DIR,
    at_commit: str = "",
    skills_overlay: tuple[str, ...] = (),
) -> Workspace:
    """A fresh workspace at `dest`: source, tree hash, strip (if not `skills`), prepare files, the overlay of this
    repository's `skills_overlay` skills, baseline. `at_commit`: pithtrain only, this repository's tree at that
    commit instead of HEAD."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")
    if mode not in SOURCE_MODES:
        raise ValueError(f"unknown source mode {mode!r}; known: {', '.join(SOURCE_MODES)}")
    fw = FRAMEWORKS[framework]
    dest.mkdir(parents=True, exist_ok=False)
    try:
        return _materialize(fw, dest, mode, skills, prepare_dir, cache_dir, at_commit, skills_overlay)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)  # a failed start leaves no half-made workspace behind
        raise


def _materialize(
    fw: FrameworkSource,
    dest: Path,
    mode: str,
    skills: bool,
    prepare_dir: Path | None,
    cache_dir: Path,
    at_commit: str = "",
    skills_overlay: tuple[str, ...] = (),
) -> Workspace:
    framework = fw.name
    ws = Workspace(path=dest, framework=framework, mode="", version="", tree_sha256="", skills="")

    if framework == "pithtrain":
        _from_repo(fw, dest, ws, at_commit)
    elif resolve_mode(framework, mode, cache_dir) == "git":
        _from_git(fw, dest, cache_dir, ws)
    else:
        if mode == "auto":
            ws.notes.append(f"auto mode: {fw.git_url} unreachable, used the PyPI sdist")
        _from_pypi(fw, dest, cache_dir, ws)

    ws.tree_sha256 = tree_sha256(dest)
    ws.skills = "kept" if skills else "stripped"
    if not skills:
        ws.stripped = strip_skills(dest)
    if prepare_dir is not None and prepare_dir.is_dir():
        shutil.copytree(prepare_dir, dest, dirs_exist_ok=True)
        ws.prepared = sorted(p.relative_to(prepare_dir).as_posix() for p in prepare_dir.rglob("*") if p.is_file())
    for name in skills_overlay:
        overlay_skill(dest, name)
    ws.skills_overlay = list(skills_overlay)
    _git("init", "--quiet", cwd=dest)
    _git("add", "--all", "--force", cwd=dest)
    ident = [
        "-c",
        "user.name=ate-bench",
        "-c",
        "user.email=ate-bench@localhost",
        "-c",
        "commit.gpgsign=false",
    ]
    _git(*ident, "commit", "--quiet", "--allow-empty", "-m", "ATE-Bench workspace baseline", cwd=dest)
    return ws


def baseline_commit(root: Path) -> str:
    """The workspace's baseline commit (`materialize` made it), read before the agent starts."""
    return _git("rev-parse", "HEAD", cwd=root).strip()


def restore_baseline(root: Path, commit: str) -> None:
    """Every file back as the baseline `commit` has it, and nothing else (every file of it is tracked)."""
    _git("reset", "--hard", "--quiet", commit, cwd=root)
    _git("clean", "-fdxq", cwd=root)


def restore_git_config(root: Path, config: bytes) -> None:
    """Put back the workspace's `.git/config` before the harness runs git there: the agent's own config
    (core.fsmonitor, a filter or diff driver) would run its commands as the harness, outside the sandbox."""
    git_dir = root / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir():
        if git_dir.is_symlink() or git_dir.exists():
            git_dir.unlink()
        raise MaterializeError(f"{git_dir}: the agent replaced the workspace's git directory; no diff can be taken")
    (git_dir / "config").unlink(missing_ok=True)
    (git_dir / "config").write_bytes(config)


def overlay_skill(dest: Path, name: str) -> None:
    """Copy this repository's skills/<name> into the workspace's skills/, found where agents look (.claude/skills)."""
    source = REPO_ROOT / "skills" / name
    if not (source / SKILL_FILE).is_file():
        raise MaterializeError(f"skills overlay {name!r}: {source / SKILL_FILE} does not exist")
    if (dest / "skills" / name).exists():
        raise MaterializeError(f"skills overlay {name!r}: the workspace already has skills/{name}")
    shutil.copytree(source, dest / "skills" / name, ignore=shutil.ignore_patterns("__pycache__"))
    link = dest / ".claude" / "skills"
    if not link.exists() and not link.is_symlink():
        link.parent.mkdir(exist_ok=True)
        link.symlink_to("../skills")


def workspace_diff(root: Path) -> tuple[str, list[str]]:
    """(diff text against the baseline commit, changed paths). New files are shown if small and text."""
    status = _git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", cwd=root)
    entries = [e for e in status.split("\0") if e]
    changed = sorted(e[3:] for e in entries)  # nothing is staged after the baseline, so no rename pairs
    parts = [_git("diff", "HEAD", "--stat", cwd=root), _git("diff", "HEAD", cwd=root)]
    new = sorted(e[3:] for e in entries if e[:2] in ("??", "!!"))
    for i, rel in enumerate(new):
        if i == _MAX_LISTED_NEW_FILES:
            parts.append(f"... and {len(new) - i} more new files\n")
            break
        path = root / rel
        if path.is_symlink():  # never followed: it may point out of the workspace, at a secret
            parts.append(f"new link {rel} -> {os.readlink(path)}\n")
            continue
        data = path.read_bytes() if path.is_file() and path.stat().st_size <= _MAX_NEW_FILE_BYTES else None
        if data is None or b"\0" in data:
            size = path.stat().st_size if path.exists() else 0
            parts.append(f"new file {rel} ({size} bytes, not shown)\n")
            continue
        lines = data.decode(errors="replace").splitlines()
        body = "".join(f"+{line}\n" for line in lines)
        header = f"diff --git a/{rel} b/{rel}\nnew file\n--- /dev/null\n+++ b/{rel}\n"
        parts.append(f"{header}@@ -0,0 +1,{len(lines)} @@\n{body}")
    text = "".join(parts)
    if len(text) > _MAX_DIFF_CHARS:
        text = text[:_MAX_DIFF_CHARS] + f"\n[diff truncated at {_MAX_DIFF_CHARS} characters]\n"
    return text, changed
