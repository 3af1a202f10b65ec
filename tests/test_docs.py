"""README.md and AGENTS.md stay true: every file path and every Python name they quote exists."""

import re

import pytest
from conftest import REPO

SOURCES = [p for p in REPO.rglob("*.py") if ".venv" not in p.parts and ".nox" not in p.parts]
DEFINED = {p.stem for p in SOURCES}  # module names count as defined
for path in SOURCES:
    for m in re.finditer(r"^\s*(?:def|class)\s+(\w+)|^\s*(?:self\.)?(\w+)\s*[:=]", path.read_text(), re.M):
        DEFINED.add(m.group(1) or m.group(2))
TOP = ("pithtrain/", "tests/", "examples/", "benchmarks/", "ate_bench/", "skills/", "tasks/", "paper/", ".ci/")


def quoted(doc: str) -> list[str]:
    return re.findall(r"`([^`\s]+)`", (REPO / doc).read_text())


@pytest.mark.parametrize("doc", ["README.md", "AGENTS.md"])
def test_quoted_paths_and_names_exist(doc):
    missing = []
    for token in quoted(doc):
        token = token.rstrip(".,:;")
        if token.startswith(TOP):
            path = token.split(":")[0]
            if "*" not in path and "<" not in path and not (REPO / path).exists():
                missing.append(path)
        elif re.fullmatch(r"[a-z_][a-z0-9_]*_[a-z0-9_]+(\(\))?|[A-Z][A-Za-z0-9]+(Cfg|Error)", token):
            name = token.removesuffix("()")
            if name not in DEFINED and not name.startswith(("test_", "distributed_")):
                missing.append(name)
    assert not missing, f"{doc} names what does not exist: {missing}"


# Code in pithtrain/ that nothing but tests calls is dead weight; each exception says why it stays.
USED_BY_TESTS_ONLY = {"zigzag_gather": "the inverse of zigzag_split, by which the tests check it"}


def test_no_engine_code_is_used_only_by_tests():
    texts = [p.read_text() for d in ("pithtrain", "benchmarks") for p in (REPO / d).rglob("*.py")]
    unused = []
    for path in (REPO / "pithtrain").rglob("*.py"):
        for name in re.findall(r"^(?:def|class)\s+([A-Za-z]\w*)", path.read_text(), re.M):
            uses = sum(len(re.findall(rf"\b{name}\b", t)) for t in texts)
            if uses <= 1 and name not in USED_BY_TESTS_ONLY:
                unused.append(f"{path.relative_to(REPO)}:{name}")
    assert not unused, f"defined in pithtrain/ but used nowhere in pithtrain/ or benchmarks/: {unused}"
