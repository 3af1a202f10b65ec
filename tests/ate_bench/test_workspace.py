"""Workspace materialization: the instruction-file switch, the tree hash, and the PyPI mode."""

import os
import shutil
from pathlib import Path

import pytest

from ate_bench.frameworks import FRAMEWORKS
from ate_bench.workspace import (
    DEFAULT_CACHE_DIR,
    REPO_ROOT,
    MaterializeError,
    NetworkError,
    materialize,
    overlay_skill,
    strip_skills,
    tree_sha256,
    workspace_diff,
)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


AGENTS_MD = """# Repo guide
Build with make.

## Skills
- validate-correctness: skills/validate-correctness/SKILL.md

```
## not a heading inside a fence
```

### Sub-heading, still in the section
## Layout
pithtrain/ is the trainer.
"""


def test_no_skills_removes_skills_and_the_section_only(tmp_path):
    root = _tree(
        tmp_path,
        {
            "AGENTS.md": AGENTS_MD,
            "pkg/CLAUDE.md": "# Pkg\n## Skills\nuse them\n",  # section runs to the end of the file
            "docs/AGENTS.md": "# No skills section here\n",
            ".claude/settings.json": "{}",
            ".codex/skills/x/SKILL.md": "---\nname: x\n---",
            ".agents/skills/y.md": "",
            "skills/run-smoke/SKILL.md": "---\nname: run-smoke\n---",
            "skills/run-smoke/scripts/check.py": "",
            "pkg/skills/__init__.py": "",  # a code package called skills: kept (no SKILL.md)
            "pkg/model.py": "",
        },
    )
    (root / ".claude" / "skills").symlink_to("../skills")
    stripped = strip_skills(root)
    assert stripped == [
        ".agents/skills/ (directory)",
        ".claude/skills (link to ../skills)",
        ".codex/skills/ (directory)",
        "AGENTS.md: section '## Skills' (lines 4-11)",
        "pkg/CLAUDE.md: section '## Skills' (lines 2-3)",
        "skills/ (directory)",
    ]
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        ".claude/settings.json",
        "AGENTS.md",
        "docs/AGENTS.md",
        "pkg/CLAUDE.md",
        "pkg/model.py",
        "pkg/skills/__init__.py",
    ]
    kept = "# Repo guide\nBuild with make.\n\n## Layout\npithtrain/ is the trainer.\n"
    assert (root / "AGENTS.md").read_text() == kept
    assert (root / "pkg/CLAUDE.md").read_text() == "# Pkg\n"
    assert (root / "docs/AGENTS.md").read_text() == "# No skills section here\n"
    assert strip_skills(root) == []  # nothing left to strip


def test_tree_hash_is_deterministic_and_sees_content_and_mode(tmp_path):
    a = _tree(tmp_path / "a", {"x.py": "1", "d/y.sh": "echo"})
    b = _tree(tmp_path / "b", {"d/y.sh": "echo", "x.py": "1"})
    assert tree_sha256(a) == tree_sha256(b)
    os.chmod(b / "d/y.sh", 0o755)
    assert tree_sha256(a) != tree_sha256(b)
    # The stat cache gives the same hash, and sees an edit (new size or mtime) like a full hash does.
    cache: dict = {}
    assert tree_sha256(b, cache) == tree_sha256(b) == tree_sha256(b, cache)
    (b / "x.py").write_text("2")
    assert tree_sha256(b, cache) == tree_sha256(b) != tree_sha256(a)
    (b / "x.py").write_text("1")
    (a / ".git").mkdir()
    (a / ".git" / "HEAD").write_text("ref")  # the harness's baseline repo is not part of the source
    os.chmod(a / "d/y.sh", 0o755)
    assert tree_sha256(a) == tree_sha256(b)


def test_workspace_diff_shows_edits_and_lists_large_new_files(tmp_path, monkeypatch):
    ws = materialize("pithtrain", tmp_path / "ws", cache_dir=tmp_path / "cache")
    (ws.path / "pyproject.toml").write_text((ws.path / "pyproject.toml").read_text() + "# edited\n")
    (ws.path / "out").mkdir()
    (ws.path / "out" / "ckpt.bin").write_bytes(b"\0" * 100_000)
    diff, changed = workspace_diff(ws.path)
    assert "+# edited" in diff and "new file out/ckpt.bin (100000 bytes, not shown)" in diff
    assert changed == ["out/ckpt.bin", "pyproject.toml"]


def test_pypi_materialization_of_torchtitan(tmp_path):
    """Network to the package index exists in CI; skipped only when pip cannot reach it."""
    fw = FRAMEWORKS["torchtitan"]
    try:
        first = materialize("torchtitan", tmp_path / "ws1", mode="pypi", cache_dir=tmp_path / "cache")
    except NetworkError as e:
        pytest.skip(f"package index unreachable: {str(e).splitlines()[0]}")
    assert first.mode == "pypi" and first.version == "torchtitan==0.2.2"
    assert first.source["sha256"] == fw.pypi_sha256
    assert (first.path / "torchtitan" / "__init__.py").is_file()
    assert (tmp_path / "cache" / "pypi" / fw.pypi_filename).is_file()
    assert any("tests/assets" in n for n in first.notes)
    # From the cache the second time: the same tree, the same hash, computed the same way.
    second = materialize("torchtitan", tmp_path / "ws2", mode="pypi", cache_dir=tmp_path / "cache")
    assert len(first.tree_sha256) == 64
    assert first.tree_sha256 == second.tree_sha256 == tree_sha256(second.path)


def test_unreachable_index_is_a_network_error(tmp_path, monkeypatch, capfd):
    # What lets the test above skip offline and fail on anything else (a wrong pin, a missing file).
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "1")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(NetworkError, match="torchtitan==0.2.2"):
        materialize("torchtitan", tmp_path / "ws", mode="pypi", cache_dir=tmp_path / "cache")
    # The download says what it fetches and passes pip's lines through as they come (progress).
    err = capfd.readouterr().err
    assert "ate_bench: downloading torchtitan==0.2.2 (sdist, once; cached in" in err
    assert "  pip: " in err
    assert not (tmp_path / "ws").exists()  # the failed start left no workspace


def test_skills_overlay_copies_this_repos_skill_before_the_baseline(tmp_path):
    cached = DEFAULT_CACHE_DIR / "pypi" / FRAMEWORKS["torchtitan"].pypi_filename
    if not cached.is_file():
        pytest.skip(f"no cached {cached.name} (python -m ate_bench caches it on first use)")
    (tmp_path / "cache" / "pypi").mkdir(parents=True)
    shutil.copy(cached, tmp_path / "cache" / "pypi" / cached.name)
    ws = materialize(
        "torchtitan", tmp_path / "ws", mode="pypi", cache_dir=tmp_path / "cache", skills_overlay=("capture-profile",)
    )
    assert ws.skills_overlay == ["capture-profile"]
    skill = ws.path / "skills" / "capture-profile"
    assert (skill / "SKILL.md").read_text() == (REPO_ROOT / "skills" / "capture-profile" / "SKILL.md").read_text()
    assert (ws.path / ".claude" / "skills" / "capture-profile" / "SKILL.md").is_file()
    assert workspace_diff(ws.path)[1] == []  # part of the baseline, not of the agent's diff
    with pytest.raises(MaterializeError, match="already has skills/capture-profile"):
        overlay_skill(ws.path, "capture-profile")
    with pytest.raises(MaterializeError, match="skills overlay 'no-such-skill'"):
        overlay_skill(ws.path, "no-such-skill")


def test_pithtrain_workspace_holds_no_benchmark_material():
    """An agent under test reads its whole workspace: the checkers' own tests (near misses, tolerances, toy keys)
    live under tests/ate_bench/, which the pithtrain workspace leaves out, as it leaves out tasks/."""
    import subprocess

    exclude = tuple(f"{p}/" for p in FRAMEWORKS["pithtrain"].exclude)
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    kept = [p for p in tracked.splitlines() if not p.startswith(exclude)]
    markers = ("qa_check", "feature_check", "key.toml")
    leaks = [p for p in kept if p.endswith(".py") and any(m in (REPO_ROOT / p).read_text() for m in markers)]
    assert not leaks, f"benchmark material in the pithtrain workspace: {leaks}"


def test_git_mode_runs_offline_from_a_seeded_cache(tmp_path, monkeypatch):
    # Megatron-LM's training entry point is git-only; offline, a bare clone of any mirror that holds the pin, put
    # where the cache keeps it, is the source: `auto` takes it without asking the remote (unreachable here).
    import dataclasses
    import subprocess

    src = _tree(tmp_path / "src", {"pretrain_gpt.py": "print('train')\n", "megatron/core/__init__.py": ""})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=src, check=True)
    subprocess.run([*git, "add", "-A"], cwd=src, check=True)
    subprocess.run([*git, "commit", "-qm", "pin"], cwd=src, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
    cache = tmp_path / "cache"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(cache / "git" / "megatron-lm.git")], check=True)
    pinned = dataclasses.replace(FRAMEWORKS["megatron-lm"], git_commit=sha[:7], git_url="http://127.0.0.1:9/x.git")
    monkeypatch.setitem(FRAMEWORKS, "megatron-lm", pinned)
    ws = materialize("megatron-lm", tmp_path / "ws", mode="auto", cache_dir=cache)
    assert (ws.mode, ws.version) == ("git", sha)
    assert (tmp_path / "ws" / "pretrain_gpt.py").read_text() == "print('train')\n"
    # without the commit in the cache, git mode asks the remote and says it could not
    shutil.rmtree(cache / "git")
    with pytest.raises(NetworkError, match="cannot fetch http://127.0.0.1:9/x.git"):
        materialize("megatron-lm", tmp_path / "ws2", mode="git", cache_dir=cache)


def test_git_mode_takes_a_carried_archive_of_the_pin(tmp_path, monkeypatch):
    # The device machine has no network and room for no mirror: tasks/megatron_pin.sh carries a `git archive` of the
    # pin (xz, some paths left out, listed beside it). Git mode takes it, checks the commit the archive's header
    # names, and records what it leaves out; an archive of another commit is refused.
    import dataclasses
    import lzma
    import subprocess

    src = _tree(tmp_path / "src", {"pretrain_gpt.py": "print('train')\n", "tests/unit.py": "", "megatron/x.py": ""})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=src, check=True)
    subprocess.run([*git, "add", "-A"], cwd=src, check=True)
    subprocess.run([*git, "commit", "-qm", "pin"], cwd=src, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(["git", "archive", "HEAD", "--", ".", ":(exclude)tests"], cwd=src, capture_output=True).stdout
    cache = tmp_path / "cache"
    (cache / "git").mkdir(parents=True)
    (cache / "git" / f"megatron-lm-{sha[:7]}.tar.xz").write_bytes(lzma.compress(tar))
    (cache / "git" / f"megatron-lm-{sha[:7]}.left-out").write_text("tests\n")
    pinned = dataclasses.replace(FRAMEWORKS["megatron-lm"], git_commit=sha[:7], git_url="http://127.0.0.1:9/x.git")
    monkeypatch.setitem(FRAMEWORKS, "megatron-lm", pinned)
    ws = materialize("megatron-lm", tmp_path / "ws", mode="auto", cache_dir=cache)
    assert (ws.mode, ws.version) == ("git", sha)
    assert ws.source["left_out"] == "tests" and ws.source["archive"] == f"megatron-lm-{sha[:7]}.tar.xz"
    assert (tmp_path / "ws" / "pretrain_gpt.py").is_file() and not (tmp_path / "ws" / "tests").exists()
    monkeypatch.setitem(FRAMEWORKS, "megatron-lm", dataclasses.replace(pinned, git_commit="0000000"))
    (cache / "git" / f"megatron-lm-{sha[:7]}.tar.xz").rename(cache / "git" / "megatron-lm-0000000.tar.xz")
    with pytest.raises(MaterializeError, match="is not a git archive of megatron-lm 0000000"):
        materialize("megatron-lm", tmp_path / "ws2", mode="git", cache_dir=cache)
