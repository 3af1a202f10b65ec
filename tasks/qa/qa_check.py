"""The Q&A checker shared by every `tasks/qa/<slug>/check.py` (stdlib only).

A task's key.toml holds, per framework, a few facts a correct answer must establish. A fact is
established when the answer's final-answer block cites a file matching the fact's `file` (path or
fnmatch glob) at lines whose range, widened by SLACK lines, holds a line matching the fact's
`pattern` (a case-sensitive regex, as code is), and the block uses every one of the fact's `words`
(case-insensitive, not inside a longer run of letters and digits: `ep` counts in `ep_group`, not in
`step`). A citation of a file or a line that does not exist fails the answer whatever else it gets
right. A citation spanning more than MAX_SPAN lines establishes nothing: it would let a whole file stand
in for the line that matters.

A task's check.py is:

    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import qa_check

    raise SystemExit(qa_check.main(Path(__file__).with_name("key.toml")))

Exit status: 0 with `PASS`, 1 with one `FAIL: ...` line per problem, 2 for a broken key (the task's
error, never the agent's: the harness reports it as ERROR). A bad answer never raises.
"""

import argparse
import fnmatch
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

SLACK = 3
"""Lines of slack either side of a cited range (an off-by-a-few citation still names the line)."""
MAX_SPAN = 40
"""A citation of more lines than this establishes no fact."""
FRAMEWORKS = ("pithtrain", "torchtitan", "megatron-lm")

CITATION = re.compile(r"(?P<path>[A-Za-z0-9_./-]+\.[A-Za-z0-9_]+):(?P<start>\d+)(?:-(?P<end>\d+))?")
"""The convention's citation regex. `find_citations` finds exactly its matches in linear time: the regex
itself backtracks quadratically on a long run of path characters with no colon (16K characters: seconds)."""
_LINES = re.compile(r":(\d+)(?:-(\d+))?")
_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-")
_EXT_CHARS = _PATH_CHARS - {".", "/", "-"}
_FACT_KEYS = {"name", "what", "file", "pattern", "mechanism", "words"}


class KeyFormatError(ValueError):
    """A key.toml that does not follow the format: the task's error, not the answer's."""


@dataclass(frozen=True)
class Fact:
    name: str
    what: str
    file: str
    pattern: re.Pattern
    mechanism: bool
    words: tuple[str, ...]


@dataclass(frozen=True)
class Key:
    term: re.Pattern
    """The question's key term (case-insensitive); read by the harness's agent-free cost."""
    facts: tuple[Fact, ...]


@dataclass(frozen=True)
class Citation:
    text: str
    """As written in the answer (after stripping `./` or the workspace path), for FAIL lines."""
    path: str
    start: int
    end: int


def read_lines(path: Path) -> list[str]:
    """The file's lines numbered as `grep -n` and editors number them (split on newline only)."""
    data = path.read_bytes().decode("utf-8", errors="replace")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_key(key_path: Path, framework: str) -> Key:
    """One framework's table of key.toml, checked strictly; KeyFormatError names the field and the fix."""
    where = f"{key_path} [{framework}]"
    try:
        raw = tomllib.loads(Path(key_path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise KeyFormatError(f"{key_path}: cannot read the key: {e}") from e
    table = raw.get(framework)
    if not isinstance(table, dict):
        raise KeyFormatError(f"{key_path}: no table [{framework}]; it has {sorted(raw)}; add one per framework")
    unknown = set(table) - {"term", "facts"}
    if unknown:
        raise KeyFormatError(f"{where}: unknown keys {sorted(unknown)}; allowed: term, facts")
    term = _regex(table.get("term"), f"{where} term", re.IGNORECASE)
    facts_raw = table.get("facts")
    if not isinstance(facts_raw, list) or len(facts_raw) < 2:
        raise KeyFormatError(f"{where}: facts = {facts_raw!r}; need at least two [[{framework}.facts]] tables")
    facts = []
    for i, f in enumerate(facts_raw):
        at = f"{where} facts[{i}]"
        if not isinstance(f, dict) or set(f) - _FACT_KEYS or not {"name", "what", "file", "pattern"} <= set(f):
            got = sorted(f) if isinstance(f, dict) else f
            raise KeyFormatError(f"{at}: keys {got}; need name, what, file, pattern; may add mechanism, words")
        for field in ("name", "what", "file"):
            if not isinstance(f[field], str) or not f[field].strip():
                raise KeyFormatError(f"{at}: {field} = {f[field]!r}; need a non-empty string")
        mechanism = f.get("mechanism", False)
        if not isinstance(mechanism, bool):
            raise KeyFormatError(f"{at}: mechanism = {mechanism!r}; need true or false")
        words = f.get("words", [])
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise KeyFormatError(f"{at}: words = {words!r}; need a list of non-empty strings")
        pattern = _regex(f["pattern"], f"{at} pattern", 0)
        facts.append(Fact(f["name"], f["what"], f["file"], pattern, mechanism, tuple(words)))
    if not any(f.mechanism for f in facts):
        raise KeyFormatError(f"{where}: no fact has mechanism = true; mark the fact citing the mechanism's own line")
    names = [f.name for f in facts]
    if len(set(names)) != len(names):
        raise KeyFormatError(f"{where}: fact names {names} repeat; each must be unique")
    return Key(term=term, facts=tuple(facts))


def _regex(value: object, where: str, flags: int) -> re.Pattern:
    if not isinstance(value, str) or not value:
        raise KeyFormatError(f"{where} = {value!r}; need a non-empty regex string")
    try:
        return re.compile(value, flags)
    except re.error as e:
        raise KeyFormatError(f"{where} = {value!r} is not a valid regex: {e}") from e


def final_answer(message: str) -> str | None:
    """The text between the last `<final-answer>` line and the `</final-answer>` line after it."""
    lines = message.splitlines()
    opens = [i for i, line in enumerate(lines) if line.strip() == "<final-answer>"]
    for i in reversed(opens):
        for j in range(i + 1, len(lines)):
            if lines[j].strip() == "</final-answer>":
                return "\n".join(lines[i + 1 : j])
    return None


def find_citations(text: str) -> list[tuple[str, str, str | None]]:
    """(path, start, end or None) of every CITATION match, left to right. A match's path is the whole run of
    path characters before a `:DIGITS` (after the previous match), valid when it ends in `.EXT`."""
    found: list[tuple[str, str, str | None]] = []
    done = 0  # end of the previous match: the regex never reuses its characters
    for m in _LINES.finditer(text):
        i = m.start()
        while i > done and text[i - 1] in _PATH_CHARS:
            i -= 1
        run = text[i : m.start()]
        dot = run.rfind(".")
        if dot > 0 and dot < len(run) - 1 and all(c in _EXT_CHARS for c in run[dot + 1 :]):
            found.append((run, m[1], m[2]))
            done = m.end()
    return found


def citations(block: str, workspace: Path) -> list[Citation]:
    prefixes = sorted({str(workspace).rstrip("/") + "/", str(workspace.resolve()).rstrip("/") + "/"}, key=len)
    found = []
    for path, first, last in find_citations(block):
        for prefix in reversed(prefixes):  # the longer of the two spellings first
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        while path.startswith("./"):
            path = path[2:]
        start = int(first)
        end = int(last) if last is not None else start
        text = f"{path}:{first}" + (f"-{last}" if last is not None else "")
        found.append(Citation(text, path, start, end))
    return found


def _resolve(c: Citation, workspace: Path, cache: dict[str, list[str] | None]) -> list[str] | None:
    """The cited file's lines, or None when the file or the range does not exist in the workspace."""
    if c.path not in cache:
        root = workspace.resolve()
        lines = None
        try:  # a name too long or a symlink loop is a citation that does not exist, not a crash
            target = (root / c.path).resolve()
            if target.is_relative_to(root) and target.is_file():
                lines = read_lines(target)
        except (OSError, RuntimeError):
            lines = None
        cache[c.path] = lines
    lines = cache[c.path]
    if lines is None or not 1 <= c.start <= c.end <= len(lines):
        return None
    return lines


def _has_word(text: str, word: str) -> bool:
    # Underscore is a boundary, so an answer naming `_unflatten` or `pp_size` uses the word.
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", text, re.IGNORECASE) is not None


def check(key: Key, workspace: Path, message: str) -> list[str]:
    """FAIL lines for an answer (the agent's whole final message); empty when it passes."""
    block = final_answer(message)
    if block is None:
        return ["FAIL: no <final-answer> block (a line <final-answer>, the answer, a line </final-answer>)"]
    fails: list[str] = []
    cache: dict[str, list[str] | None] = {}
    good: list[tuple[Citation, list[str]]] = []
    for c in citations(block, workspace):
        lines = _resolve(c, workspace, cache)
        if lines is None:
            line = f"FAIL: citation {c.text} does not exist (fabricated)"
            if line not in fails:
                fails.append(line)
        else:
            good.append((c, lines))
    for fact in key.facts:
        cited = [(c, lines) for c, lines in good if fnmatch.fnmatchcase(c.path, fact.file)]
        short = [(c, lines) for c, lines in cited if c.end - c.start + 1 <= MAX_SPAN]
        hit = any(
            fact.pattern.search(lines[i])
            for c, lines in short
            for i in range(max(c.start - SLACK, 1) - 1, min(c.end + SLACK, len(lines)))
        )
        if not cited:
            fails.append(f"FAIL: {fact.name}: no citation of {fact.file} ({fact.what})")
        elif not hit:
            spans = ", ".join(c.text for c, _ in cited)
            why = f"no cited range of {fact.file} (within {SLACK} lines) has a line matching /{fact.pattern.pattern}/"
            if len(short) < len(cited):
                why += f"; citations over {MAX_SPAN} lines count for nothing"
            fails.append(f"FAIL: {fact.name}: {why} (cited: {spans}; wanted: {fact.what})")
        missing = [w for w in fact.words if not _has_word(block, w)]
        if missing:
            fails.append(f"FAIL: {fact.name}: the final answer does not use the word(s) {', '.join(missing)}")
    return fails


def main(key_path: Path, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a Q&A answer against the task's key.toml.")
    parser.add_argument("--workspace", type=Path, required=True, help="the framework's tree the answer cites")
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--answer", type=Path, required=True, help="the agent's final message")
    args = parser.parse_args(argv)
    try:
        key = load_key(Path(key_path), args.framework)
    except KeyFormatError as e:
        print(f"key error: {e}", file=sys.stderr)
        return 2
    if not args.workspace.is_dir():
        print(f"--workspace {args.workspace} is not a directory", file=sys.stderr)
        return 2
    try:
        message = args.answer.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        print(f"FAIL: cannot read the answer {args.answer}: {e}")
        return 1
    fails = check(key, args.workspace, message)
    print("\n".join(fails) if fails else "PASS")
    return 1 if fails else 0
