"""The Q&A checker shared by every `tasks/qa/<slug>/check.py` (stdlib only).

An answer ends in a `<final-answer>` block whose last lines are SLOTS, `name: value`, one per slot that
the task's instruction.md lists (its `**Slots.**` list: `name` (citation) or `name` (choice: `a` | `b`)).
The last line naming a slot is its value (explanation lines may start alike). Only slots are scored, with
one exception: a code name in backticks anywhere in the block (`snake_case`, `CamelCase`, 4+ characters)
that no text file of the workspace contains fails the answer (another version's or an invented name; the
instruction says so), unless the answer says it does not exist ("no `attn_impl` switch"); a name found only
in OLD_NAME_FILES counts for an answer that speaks of that experiment, not for one that presents it as the
tree's. A citation in the explanation that does not resolve is a `note:` line, not a FAIL.

The task's key.toml has, per framework, `term` (the question's key term, read by `ate_bench cost`) and
one table per slot:

    [torchtitan.world-split]                 # a citation slot
    what = "the assert that the degrees multiply to the world size"
    at = [ { file = "torchtitan/distributed/parallel_dims.py", pattern = '== self\\.world_size' } ]
    absent = "no"                            # optional: "no" (default), "yes" or "either"
    absent_by_path = { 'torch_dcp' = "yes" }   # optional: `absent` for an answer whose path line matches
    # an at entry may add slack = 0..3 (default SLACK) where a near line is another path's

    [torchtitan.config-source]               # a choice slot
    what = "the TOML job config (or --model.* flags over it)"
    accept = ["config-file"]
    accept_by_file = { "pithtrain/models/gpt_oss.py" = ["..."] }   # optional, see _check_choice
    accept_by_path = { '--some-flag' = ["..."] }                     # optional, see _check_choice

A slot the instruction gained later is named at the top of key.toml, `since_freeze = { innermost = 13 }`:
an answer written to an earlier freeze's instruction (a blind set; `--written-at-freeze`) is not asked for it.

An answer about a non-default path names its setting on a `path:` line among the slot lines (the
instruction says so); without one, or with `path: default`, it describes the defaults. An `at` entry may add
`path = REGEX` (searched case-blind in that line, backticks dropped): a region of an optional path, which lands
only for an answer whose `path` line matches; an entry without it lands for any answer. A citation slot's
`absent_by_path` and a choice slot's `accept_by_path` stand in for `absent` and `accept` the same way.

A citation lands in an accepted region when its file matches an `at` entry's `file` (fnmatch glob) and its
range, widened by the entry's slack (SLACK lines unless it says less) each side and no longer than MAX_SPAN
lines, holds a line matching that entry's `pattern` (a case-sensitive regex). A citation slot passes when
its value has one or two citations and EVERY one lands (a right citation appended to a wrong one does not
rescue it); `absent` then the evidence passes only where the key's `absent` allows it, its evidence landing
too. A choice slot passes when its value (the first word; for a list slot, every word before a parenthesis)
is accepted; a word outside the instruction's list is a bad choice.

A cited path resolves, in this order, as: a path under the workspace root (`root`); a path under the
framework's package directory, PACKAGE_DIRS (`package`); a unique suffix of one file's path at a `/`
boundary (`suffix`); a suffix of several files of which exactly one has the fewest directories
(`suffix-shallowest`: `parallel_dims.py` is torchtitan/distributed/parallel_dims.py, not the copy under
torchtitan/experiments/, as a human reader takes it); of several equally shallow files, the one in a folder
another citation of the answer resolves into (`suffix-beside`: `optimizer.py` beside `optimizer/__init__.py`
is megatron/core/optimizer/optimizer.py). A slot's citation of a path that matches nothing or
several equally deep files is fabricated, as is a line past the file's end: the slot fails. Every citation
resolved by a rule other than `root` is printed as a `resolved:` line.

Exit status: 0 with `PASS`, 1 with one `FAIL: ...` line per problem (each naming the slot), 2 for a broken
key or instruction (the task's error: KeyFormatError, naming the field and the fix). A bad answer never
raises.
"""

import argparse
import fnmatch
import os
import re
import sys
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

SLACK = 3
"""Lines of slack either side of a cited range (an off-by-a-few citation still names the line)."""
MAX_SPAN = 40
"""A citation of more lines than this lands nowhere: it would let a whole file stand in for the line."""
MAX_CITATIONS = 2
"""A citation slot takes one or two citations (the instruction says so)."""
FRAMEWORKS = ("pithtrain", "torchtitan", "megatron-lm")
PACKAGE_DIRS = {
    "pithtrain": ("pithtrain",),
    "torchtitan": ("torchtitan",),
    "megatron-lm": ("megatron/core", "megatron"),
}
"""Where a package-relative citation (`trainer.py:940`, `core/parallel_state.py:12`) is looked up."""
OLD_NAME_FILES = {"torchtitan": ("torchcomms", ("torchtitan/experiments/torchcomms/parallel_dims.py",))}
"""(the word an answer about them uses, files): an experiment's code that keeps an older version's names (TorchComms'
ParallelDims subclass builds the old meshes, `dp_shard_cp`, `dp_shard_mod_ep`). A backticked name found only there
is another version's, unless the answer speaks of that experiment."""
ABSENT_VALUES = ("no", "yes", "either")
TEXT_SUFFIXES = (".py", ".pyi", ".toml", ".md", ".rst", ".txt", ".yaml", ".yml", ".json", ".sh", ".cfg", ".ini")
"""The files searched for a backticked name of the final block."""

_LINES = re.compile(r":(\d+)(?:-(\d+))?")
_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-")
_EXT_CHARS = _PATH_CHARS - {".", "/", "-"}
_SLOT_DOC = re.compile(r"^- `(?P<name>[a-z][a-z0-9-]*)` \((?P<kind>citation|choice: (?P<words>[^)]*))\): (?P<what>.*)$")
_SLOT_LINE = re.compile(
    r"^[\s>*_`-]*(?:\d+[.)]\s+[*_`]*)?(?P<name>[a-z][a-z0-9]*(?:-[a-z0-9]+)*)[*_`]*\s*:(?P<value>.*)$"
)
_LIST_FILLERS = frozenset({"and", "x", "plus"})
_WORD = re.compile(r"[a-z0-9][a-z0-9-]*")
_BACKTICKS = re.compile(r"`([^`\n]+)`")
_NEGATED_NAME = re.compile(
    r"\b(?:no|not|never|nor|without)\s+(?:[\w-]+\s+){0,2}`[^`\n]+`"
    r"|`[^`\n]+`[\w-]*\s+(?:does not|doesn't|do not|don't) exist",
    re.IGNORECASE,
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE_LIKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]")


class KeyFormatError(ValueError):
    """A key.toml or instruction.md that does not follow the format: the task's error, not the answer's."""


@dataclass(frozen=True)
class SlotDoc:
    """A slot as the instruction lists it."""

    name: str
    kind: str
    """citation | choice"""
    words: tuple[str, ...]
    """The choice words (empty for a citation slot)."""
    is_list: bool
    """A choice slot that takes a comma-separated list."""


@dataclass(frozen=True)
class Region:
    file: str
    pattern: re.Pattern
    slack: int
    """SLACK, or less where a near line means something else (the optional branch two lines away)."""
    path: re.Pattern | None
    """An optional path's region: lands only for an answer whose `path` line this matches."""


@dataclass(frozen=True)
class SlotKey:
    doc: SlotDoc
    what: str
    at: tuple[Region, ...]
    absent: str
    accept: tuple[frozenset[str], ...]
    by_file: tuple[tuple[str, tuple[frozenset[str], ...]], ...]
    """(file glob, accepted values) pairs: where a model family's answer differs (`accept_by_file`)."""
    by_path: tuple[tuple[re.Pattern, tuple[frozenset[str], ...]], ...]
    """(path regex, accepted values) pairs: the values for an answer that names that path (`accept_by_path`)."""
    absent_by_path: tuple[tuple[re.Pattern, str], ...]
    """(path regex, absent) pairs: `absent` for an answer that names that path (`absent_by_path`)."""
    since_freeze: int = 0
    """The freeze whose instruction first listed this slot (`since_freeze`); 0: every freeze's."""


@dataclass(frozen=True)
class Key:
    term: re.Pattern
    """The question's key term (case-insensitive); read by the harness's agent-free cost."""
    slots: tuple[SlotKey, ...]


@dataclass(frozen=True)
class Citation:
    text: str
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


def read_slot_docs(instruction: Path) -> tuple[SlotDoc, ...]:
    """The slots listed in the instruction's `**Slots.**` section."""
    try:
        text = instruction.read_text()
    except OSError as e:
        raise KeyFormatError(f"{instruction}: cannot read the instruction: {e}") from e
    docs = []
    for line in text.split("**Slots.**", 1)[-1].splitlines():
        m = _SLOT_DOC.match(line)
        if m:
            words = tuple(re.findall(r"`([^`]+)`", m["words"] or ""))
            kind = "choice" if m["words"] is not None else "citation"
            docs.append(SlotDoc(m["name"], kind, words, "comma-separated" in m["what"]))
    if not docs:
        raise KeyFormatError(f"{instruction}: no slot lines (- `name` (citation|choice: ...): ...) after **Slots.**")
    return tuple(docs)


def load_key(key_path: Path, framework: str, instruction: Path | None = None) -> Key:
    """One framework's table of key.toml, checked strictly against the instruction's slots (instruction.md
    next to the key unless given); KeyFormatError names the field and the fix."""
    key_path = Path(key_path)
    docs = read_slot_docs(instruction or key_path.with_name("instruction.md"))
    where = f"{key_path} [{framework}]"
    try:
        raw = tomllib.loads(key_path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise KeyFormatError(f"{key_path}: cannot read the key: {e}") from e
    table = raw.get(framework)
    if not isinstance(table, dict):
        raise KeyFormatError(f"{key_path}: no table [{framework}]; it has {sorted(raw)}; add one per framework")
    names = {d.name for d in docs}
    unknown = set(table) - names - {"term"}
    if unknown:
        raise KeyFormatError(f"{where}: unknown keys {sorted(unknown)}; allowed: term and the slots {sorted(names)}")
    missing = names - set(table)
    if missing:
        raise KeyFormatError(f"{where}: no table for slot(s) {sorted(missing)}; add [{framework}.<slot>] for each")
    since = raw.get("since_freeze", {})
    if not isinstance(since, dict) or not all(isinstance(v, int) and v > 0 for v in since.values()):
        raise KeyFormatError(f"{key_path}: since_freeze = {since!r}; need {{ slot = FREEZE, ... }}, FREEZE > 0")
    if set(since) - names:
        raise KeyFormatError(f"{key_path}: since_freeze names {sorted(set(since) - names)}, not slots {sorted(names)}")
    term = _regex(table.get("term"), f"{where} term", re.IGNORECASE)
    slots = (_slot_key(doc, table[doc.name], f"{where}.{doc.name}") for doc in docs)
    return Key(term, tuple(replace(s, since_freeze=since.get(s.doc.name, 0)) for s in slots))


def _slot_key(doc: SlotDoc, raw: object, at: str) -> SlotKey:
    if not isinstance(raw, dict):
        raise KeyFormatError(f"{at} = {raw!r}; need a table")
    allowed = (
        {"what", "at", "absent", "absent_by_path"}
        if doc.kind == "citation"
        else {"what", "accept", "accept_by_file", "accept_by_path"}
    )
    if set(raw) - allowed or not isinstance(raw.get("what"), str) or not raw["what"].strip():
        raise KeyFormatError(f"{at}: keys {sorted(raw)}; a {doc.kind} slot needs what (non-empty) and {allowed}")
    if doc.kind == "choice":
        accept = raw.get("accept")
        if not isinstance(accept, list) or not accept or not all(isinstance(a, str) for a in accept):
            raise KeyFormatError(f"{at}: accept = {accept!r}; need a non-empty list of the words {list(doc.words)}")
        by_file_raw = raw.get("accept_by_file", {})
        if not isinstance(by_file_raw, dict) or not all(isinstance(v, list) and v for v in by_file_raw.values()):
            raise KeyFormatError(f"{at}: accept_by_file = {by_file_raw!r}; need {{ GLOB = [words], ... }}")
        by_file = tuple((glob, _choice_sets(doc, v, at)) for glob, v in by_file_raw.items())
        by_path_raw = raw.get("accept_by_path", {})
        if not isinstance(by_path_raw, dict) or not all(isinstance(v, list) and v for v in by_path_raw.values()):
            raise KeyFormatError(f"{at}: accept_by_path = {by_path_raw!r}; need {{ REGEX = [words], ... }}")
        by_path = tuple(
            (_regex(rx, f"{at} accept_by_path", re.IGNORECASE), _choice_sets(doc, v, at))
            for rx, v in by_path_raw.items()
        )
        return SlotKey(doc, raw["what"], (), "no", _choice_sets(doc, accept, at), by_file, by_path, ())
    absent = raw.get("absent", "no")
    if absent not in ABSENT_VALUES:
        raise KeyFormatError(f"{at}: absent = {absent!r}; need one of {list(ABSENT_VALUES)}")
    by_path_raw = raw.get("absent_by_path", {})
    if not isinstance(by_path_raw, dict) or not all(v in ABSENT_VALUES for v in by_path_raw.values()):
        raise KeyFormatError(f"{at}: absent_by_path = {by_path_raw!r}; need {{ REGEX = one of {list(ABSENT_VALUES)} }}")
    absent_by_path = tuple((_regex(rx, f"{at} absent_by_path", re.IGNORECASE), v) for rx, v in by_path_raw.items())
    regions_raw = raw.get("at")
    if not isinstance(regions_raw, list) or not regions_raw:
        raise KeyFormatError(f"{at}: at = {regions_raw!r}; need a list of {{ file = GLOB, pattern = REGEX }}")
    regions = []
    for i, r in enumerate(regions_raw):
        fields_ok = isinstance(r, dict) and {"file", "pattern"} <= set(r) <= {"file", "pattern", "slack", "path"}
        if not fields_ok or not isinstance(r["file"], str) or not r["file"]:
            raise KeyFormatError(
                f"{at}: at[{i}] = {r!r}; need {{ file = GLOB, pattern = REGEX }} (and maybe slack, path)"
            )
        slack = r.get("slack", SLACK)
        if slack not in range(SLACK + 1) or isinstance(slack, bool):
            raise KeyFormatError(f"{at}: at[{i}].slack = {slack!r}; need an integer 0..{SLACK}")
        path = _regex(r["path"], f"{at} at[{i}].path", re.IGNORECASE) if "path" in r else None
        regions.append(Region(r["file"], _regex(r["pattern"], f"{at} at[{i}].pattern", 0), slack, path))
    return SlotKey(doc, raw["what"], tuple(regions), absent, (), (), (), absent_by_path)


def _choice_sets(doc: SlotDoc, accept: list, at: str) -> tuple[frozenset[str], ...]:
    sets = tuple(frozenset(_WORD.findall(a.lower())) if isinstance(a, str) else frozenset() for a in accept)
    for a, s in zip(accept, sets, strict=True):
        if not s or s - set(doc.words) or (len(s) > 1 and not doc.is_list):
            raise KeyFormatError(f"{at}: accept value {a!r} is not one of the instruction's {list(doc.words)}")
    return sets


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
    """(path, start, end or None) of every `PATH.EXT:START[-END]`, left to right, in linear time. A match's
    path is the whole run of path characters before a `:DIGITS` (after the previous match), valid when it
    ends in `.EXT`."""
    found: list[tuple[str, str, str | None]] = []
    done = 0  # end of the previous match: never reuse its characters
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


def citations(text: str, workspace: Path) -> list[Citation]:
    prefixes = sorted({str(workspace).rstrip("/") + "/", str(workspace.resolve()).rstrip("/") + "/"}, key=len)
    found = []
    for path, first, last in find_citations(text):
        for prefix in reversed(prefixes):  # the longer of the two spellings first
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        while path.startswith("./"):
            path = path[2:]
        start = int(first)
        end = int(last) if last is not None else start
        found.append(Citation(f"{path}:{first}" + (f"-{last}" if last is not None else ""), path, start, end))
    return found


class Resolver:
    """Cited paths to workspace files by the rules root, package, suffix; caches lines and the file list."""

    def __init__(self, workspace: Path, framework: str):
        self.root = workspace.resolve()
        self.framework = framework
        self.files: list[str] | None = None
        self.lines: dict[str, list[str]] = {}
        self.rules: dict[str, tuple[str, str] | str] = {}
        """cited path -> (workspace path, rule), or the reason it does not resolve."""
        self.beside: set[str] = set()
        """The folders of the answer's other citations (set_beside): they break a tie of equally shallow files."""

    def set_beside(self, cited: list[Citation]) -> None:
        """Note the folders the answer's citations resolve into, then forget what was resolved without them."""
        for c in cited:
            got = self.resolve(c.path)
            if not isinstance(got, str):
                self.beside.add(got[0].rpartition("/")[0])
        self.rules.clear()

    def _file(self, rel: str) -> bool:
        try:  # a name too long or a symlink loop is a path that does not exist, not a crash
            target = (self.root / rel).resolve()
            return target.is_relative_to(self.root) and target.is_file()
        except (OSError, RuntimeError, ValueError):
            return False

    def _all_files(self) -> list[str]:
        if self.files is None:
            self.files = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                rel = Path(dirpath).relative_to(self.root).as_posix()
                self.files += [f if rel == "." else f"{rel}/{f}" for f in sorted(filenames)]
        return self.files

    def resolve(self, path: str) -> tuple[str, str] | str:
        if path not in self.rules:
            self.rules[path] = self._resolve(path)
        return self.rules[path]

    def _resolve(self, path: str) -> tuple[str, str] | str:
        if path.startswith("/") or ".." in path.split("/"):
            return "an absolute path outside the workspace or a path with '..'"
        if self._file(path):
            return (Path(path).as_posix(), "root")
        packaged = [f"{d}/{path}" for d in PACKAGE_DIRS[self.framework] if self._file(f"{d}/{path}")]
        if len(packaged) == 1:
            return (packaged[0], "package")
        if len(packaged) > 1:
            return f"matches several files under the package directories: {', '.join(packaged)}"
        suffix = [f for f in self._all_files() if f.endswith("/" + path)]
        if len(suffix) == 1:
            return (suffix[0], "suffix")
        depth = min((f.count("/") for f in suffix), default=0)
        shallowest = [f for f in suffix if f.count("/") == depth]
        if len(shallowest) == 1:  # e.g. torchtitan/distributed/parallel_dims.py, not experiments/*/parallel_dims.py
            return (shallowest[0], "suffix-shallowest")
        beside = [f for f in shallowest if f.rpartition("/")[0] in self.beside]
        if len(beside) == 1:  # `optimizer.py` cited beside `optimizer/__init__.py`: the one in that folder
            return (beside[0], "suffix-beside")
        if suffix:
            tied = ", ".join(shallowest[:3])
            return f"a suffix of {len(suffix)} files, {len(shallowest)} of them equally shallow ({tied})"
        return "no file has this path, under the root, the package or as a suffix"

    def file_lines(self, rel: str) -> list[str]:
        if rel not in self.lines:
            self.lines[rel] = read_lines(self.root / rel)
        return self.lines[rel]


def _problem(c: Citation, resolver: Resolver) -> str:
    """Why a citation is fabricated, or "" when it resolves to existing lines."""
    got = resolver.resolve(c.path)
    if isinstance(got, str):
        return got
    n = len(resolver.file_lines(got[0]))
    return "" if 1 <= c.start <= c.end <= n else f"lines {c.start}-{c.end} are not in {got[0]} ({n} lines)"


def stated_path(values: list[str]) -> str:
    """The settings an answer's `path:` lines name, joined by "; ", or "" for the defaults (no line, or only
    `default`). Every line counts: an answer may name one setting a line (the family, then a flag)."""
    said = (v.replace("`", "").replace("*", "").strip() for v in values)
    return "; ".join(s for s in said if not re.match(r"(default\b|$)", s, re.IGNORECASE))


def _names(rx: re.Pattern, path: str) -> bool:
    """Whether an answer whose `path` line says `path` ("" for the defaults) names the option `rx` matches."""
    return path != "" and rx.search(path) is not None


def _lands(c: Citation, slot: SlotKey, resolver: Resolver, path: str) -> bool:
    rel = resolver.resolve(c.path)[0]
    if c.end - c.start + 1 > MAX_SPAN:
        return False
    lines = resolver.file_lines(rel)

    def window(r: Region) -> range:
        return range(max(c.start - r.slack, 1) - 1, min(c.end + r.slack, len(lines)))

    return any(
        (r.path is None or _names(r.path, path))
        and fnmatch.fnmatchcase(rel, r.file)
        and any(r.pattern.search(lines[i]) for i in window(r))
        for r in slot.at
    )


def slot_values(block: str, known: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    """({slot: [value per line naming it]}, unknown hyphenated names written as slots in the block's trailing
    run of slot-shaped lines). The last line naming a slot is its value: the instruction puts the slot lines
    after the explanation, whose lines may start alike (`- all-reduce: ...` there is prose, not a slot)."""
    lines = block.splitlines()
    tail = len(lines)
    while tail > 0 and (not lines[tail - 1].strip() or _SLOT_LINE.match(lines[tail - 1])):
        tail -= 1
    values: dict[str, list[str]] = {}
    unknown = []
    for i, line in enumerate(lines):
        m = _SLOT_LINE.match(line)
        if not m:
            continue
        if m["name"] in known:
            values.setdefault(m["name"], []).append(m["value"].strip())
        elif "-" in m["name"] and i >= tail:
            unknown.append(m["name"])
    return values, unknown


def code_names(block: str) -> list[str]:
    """The code-like names written in backticks (`snake_case`, `CamelCase`, `UPPER_CASE`, 4+ characters),
    less those the answer says do not exist ("no `attn_impl` switch", "`x` does not exist")."""
    claimed = _NEGATED_NAME.sub("", block)
    names = (w for span in _BACKTICKS.findall(claimed) for w in _IDENT.findall(span))
    return list(dict.fromkeys(w for w in names if len(w) >= 4 and _CODE_LIKE.search(w)))


def absent_names(names: list[str], workspace: Path, aside: tuple[str, ...] = ()) -> list[str]:
    """The names no text file of the workspace contains, as a case-blind substring (`pos_freqs` is in
    `pos_freqs_F`; `LayerNorm` in `input_layernorm`, so naming what the framework does not use passes), the
    files `aside` (relative to the workspace) left out."""
    left = {n.lower() for n in names}
    skip = {workspace / a for a in aside}
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        filenames = [f for f in filenames if Path(dirpath, f) not in skip]
        for f in filenames:
            if not left:
                return []
            if f.endswith(TEXT_SUFFIXES):
                text = Path(dirpath, f).read_bytes().decode("utf-8", errors="replace").lower()
                left = {n for n in left if n not in text}
    return [n for n in names if n.lower() in left]


def _check_choice(slot: SlotKey, value: str, cited_files: set[str], path: str) -> str:
    """A FAIL reason, or "" when the choice is accepted. Where the key has `accept_by_file`, the value must be
    accepted for every glob that a file cited in the answer's citation slots matches (the model family the
    answer describes); `accept` applies when it cites none of them. Where the answer's `path` matches an
    `accept_by_path` regex, that entry's values stand in for `accept`."""
    head = value.lower().replace("`", "").replace("*", "")
    if slot.doc.is_list:
        words = frozenset(_WORD.findall(re.split(r"[(\u2014;]| - ", head, maxsplit=1)[0])) - _LIST_FILLERS
    else:
        first = _WORD.match(head.strip())
        words = frozenset([first[0].rstrip("-")]) if first else frozenset()
    listed = ", ".join(slot.doc.words)
    if not words or words - set(slot.doc.words):
        return f"{slot.doc.name}: {value!r} is not a choice the instruction lists ({listed})"
    families = [(glob, sets) for glob, sets in slot.by_file if any(fnmatch.fnmatchcase(f, glob) for f in cited_files)]
    for glob, sets in families:
        if words not in sets:
            said = ", ".join(sorted(words))
            return f"{slot.doc.name}: {said} is wrong for {glob}, which the answer cites (wanted: {slot.what})"
    named = [sets for rx, sets in slot.by_path if _names(rx, path)]
    accept = tuple(s for sets in named for s in sets) if named else slot.accept
    if not families and words not in accept:
        return f"{slot.doc.name}: {', '.join(sorted(words))} is wrong (wanted: {slot.what})"
    return ""


def _check_citation_slot(slot: SlotKey, value: str, workspace: Path, resolver: Resolver, path: str) -> str:
    name = slot.doc.name
    cited = citations(value, workspace)
    says_absent = re.match(r"[`*_\s]*absent\b", value, re.IGNORECASE) is not None
    absent = next((v for rx, v in slot.absent_by_path if _names(rx, path)), slot.absent)
    if says_absent and absent == "no":
        return f"{name}: says absent, but the framework has it ({slot.what})"
    if not says_absent and absent == "yes":
        return f"{name}: cites {value!r}, but the framework lacks it; wanted absent and the evidence ({slot.what})"
    if not cited:
        return f"{name}: no path:LINE citation in {value!r}"
    if len(cited) > MAX_CITATIONS:
        return f"{name}: {len(cited)} citations; a citation slot takes one or two"
    for c in cited:
        problem = _problem(c, resolver)
        if problem:
            return f"{name}: citation {c.text} is fabricated: {problem}"
        if not _lands(c, slot, resolver, path):
            where = resolver.resolve(c.path)[0]
            span = f"; over {MAX_SPAN} lines" if c.end - c.start + 1 > MAX_SPAN else ""
            return f"{name}: {c.text} ({where}{span}) is not where this happens (wanted: {slot.what})"
    return ""


def check(
    key: Key, workspace: Path, message: str, framework: str, written_at_freeze: int | None = None
) -> tuple[list[str], list[str]]:
    """(FAIL lines, `resolved:` note lines) for an answer (the agent's whole final message); one written to
    an earlier freeze's instruction (`written_at_freeze`) is not asked for the slots added after it."""
    block = final_answer(message)
    if block is None:
        return ["FAIL: no <final-answer> block (a line <final-answer>, the answer, a line </final-answer>)"], []
    resolver = Resolver(workspace, framework)
    resolver.set_beside(citations(block, workspace))
    fails: list[str] = []
    notes: list[str] = []
    for c in citations(block, workspace):  # the explanation's too: noted, scored only in a slot
        problem = _problem(c, resolver)
        got = resolver.resolve(c.path)
        line = f"note: citation {c.text} does not resolve: {problem}" if problem else ""
        if line and line not in notes:
            notes.append(line)
        if not isinstance(got, str) and got[1] != "root":
            note = f"resolved: {c.path} -> {got[0]} (rule: {got[1]})"
            if note not in notes:
                notes.append(note)
    word, old_files = OLD_NAME_FILES.get(framework, ("", ()))
    aside = () if word in block.lower() else old_files
    for name in absent_names(code_names(block), workspace, aside):
        where = f" but {', '.join(aside)} (older names)" if aside else ""
        fails.append(
            f"FAIL: names `{name}`, which no file of the workspace{where} contains (another version's or invented)"
        )
    values, unknown = slot_values(block, {s.doc.name for s in key.slots} | {"path"})
    path = stated_path(values.get("path", []))
    fails += [f"FAIL: {name}: not a slot of this question" for name in dict.fromkeys(unknown)]
    cited_files = {
        got[0]
        for slot in key.slots
        if slot.doc.kind == "citation" and values.get(slot.doc.name)
        for c in citations(values[slot.doc.name][-1], workspace)
        if not isinstance(got := resolver.resolve(c.path), str)
    }
    for slot in key.slots:
        given = values.get(slot.doc.name, [])
        if written_at_freeze is not None and slot.since_freeze > written_at_freeze:
            continue
        if not given:
            fails.append(f"FAIL: {slot.doc.name}: missing (a line `{slot.doc.name}: ...` in the final block)")
            continue
        if slot.doc.kind == "choice":
            why = _check_choice(slot, given[-1], cited_files, path)
        else:
            why = _check_citation_slot(slot, given[-1], workspace, resolver, path)
        if why:
            fails.append(f"FAIL: {why}")
    return fails, notes


def main(key_path: Path, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a Q&A answer against the task's key.toml.")
    parser.add_argument("--workspace", type=Path, required=True, help="the framework's tree the answer cites")
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--answer", type=Path, required=True, help="the agent's final message")
    parser.add_argument(
        "--written-at-freeze",
        type=int,
        metavar="N",
        help="a blind set's answer, written to freeze N's instruction: the slots added after N are not asked",
    )
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
    fails, notes = check(key, args.workspace, message, args.framework, args.written_at_freeze)
    print("\n".join(notes + (fails or ["PASS"])))
    return 1 if fails else 0
