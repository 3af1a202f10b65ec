"""`python -m ate_bench cost`: an agent-free cost for every Q&A task and framework, from key.toml alone.

For each task's key (notes: tasks/qa/qa_check.py reads the same file) and each framework's workspace:
- the files the key's citation slots accept (each slot's `at` files, paths or fnmatch globs; of the
  matching files the one nearest the entry point, then the shortest, since any one of them establishes
  the slot; the record keeps the old field names `facts`, `unmatched_facts`): their lines and bytes, what
  a correct answer must at least read;
- how many of the framework's source files (SOURCE_SUFFIXES) match the key's `term` regex
  (case-insensitive), what an agent must sift to find them;
- import hops from the framework's training entry point (frameworks.py) to each cited file, over
  the Python import graph (`ast`, every import statement, resolved to files of the workspace; a
  package's `__init__.py` counts as imported with it); a file the graph never reaches is "unreachable"
  (dynamic imports, `importlib` and string registries, are not followed).
A reproducible floor under an agent's exploration, reported beside (never instead of) agent results.
"""

import argparse
import ast
import fnmatch
import math
import re
import shutil
import tempfile
import tomllib
from collections import deque
from pathlib import Path

from ate_bench.frameworks import FRAMEWORKS
from ate_bench.tasks import TaskError, TaskSpec
from ate_bench.validate import provenance, select_tasks, write_record
from ate_bench.workspace import materialize, resolve_mode

SCHEMA = "ate-bench-cost-1"
SOURCE_SUFFIXES = (".py", ".pyi", ".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".sh", ".toml", ".yaml", ".yml")


def workspace_files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    )


def _module_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, files: list[str]) -> tuple[dict[str, set[str]], list[str]]:
    """(file -> files it imports, files that do not parse) over the workspace's .py files."""
    by_module = {_module_name(rel): rel for rel in files if rel.endswith(".py")}
    graph: dict[str, set[str]] = {}
    unparsed: list[str] = []
    for rel in (f for f in files if f.endswith(".py")):
        try:
            tree = ast.parse((root / rel).read_bytes(), filename=rel)
        except (SyntaxError, ValueError):
            unparsed.append(rel)
            continue
        package = _module_name(rel).split(".")
        if not rel.endswith("__init__.py"):
            package = package[:-1]
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                base = [*base, *(node.module.split(".") if node.module else [])]
                names.add(".".join(base))
                names.update(".".join([*base, a.name]) for a in node.names)
        edges = set()
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
                target = by_module.get(".".join(parts[:i]))
                if target and target != rel:
                    edges.add(target)
        graph[rel] = edges
    return graph, unparsed


def hops_from(entry: str, graph: dict[str, set[str]]) -> dict[str, int]:
    dist, todo = {entry: 0}, deque([entry])
    while todo:
        here = todo.popleft()
        for nxt in graph.get(here, ()):
            if nxt not in dist:
                dist[nxt] = dist[here] + 1
                todo.append(nxt)
    return dist


def read_key(task: TaskSpec, framework: str) -> tuple[re.Pattern, list[dict]]:
    """The `term` and the citation slots ({"name", "files": [glob, ...]}) of one framework's table (a slot table
    with an `at` list of {file, pattern}; choice slots name no file); TaskError names what is wrong."""
    path = task.key_file
    if not path.is_file():
        raise TaskError(f"{task.dir}: no key.toml (cost reads the Q&A answer key)")
    try:
        table = tomllib.loads(path.read_text()).get(framework)
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: not valid TOML: {e}") from e
    if not isinstance(table, dict) or not isinstance(table.get("term"), str) or not table["term"]:
        raise TaskError(f"{path}: [{framework}] needs term = '<regex>' (the question's key term)")
    facts = []
    for name, slot in table.items():
        if name == "term" or not isinstance(slot, dict) or "at" not in slot:
            continue
        at = slot["at"]
        if not isinstance(at, list) or not all(isinstance(r, dict) and isinstance(r.get("file"), str) for r in at):
            raise TaskError(f"{path}: [{framework}.{name}] at = {at!r}; need a list of {{ file = GLOB, pattern = RE }}")
        facts.append({"name": name, "files": [r["file"] for r in at]})
    if not facts:
        raise TaskError(f"{path}: [{framework}] has no citation slot ([{framework}.<slot>] with at = [...])")
    try:
        term = re.compile(table["term"], re.IGNORECASE)
    except re.error as e:
        raise TaskError(f"{path}: [{framework}] term = {table['term']!r} is not a valid regex: {e}") from e
    return term, facts


def _lines(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def cost_row(task: TaskSpec, framework: str, root: Path, files: list[str], hops: dict[str, int]) -> dict:
    term, facts = read_key(task, framework)
    cited: dict[str, list[str]] = {}
    unmatched, matches = [], {}
    for fact in facts:
        matched = [f for f in files if any(fnmatch.fnmatchcase(f, glob) for glob in fact["files"])]
        matches[fact["name"]] = len(matched)
        if not matched:
            unmatched.append(f"{fact['name']}: no file matches {' | '.join(fact['files'])}")
            continue
        # Any one accepted file establishes the slot: the floor counts the nearest (hops, then lines).
        best = min(matched, key=lambda f: (hops.get(f, math.inf), _lines((root / f).read_bytes()), f))
        cited.setdefault(best, []).append(fact["name"])
    entries = []
    for rel, names in sorted(cited.items()):
        data = (root / rel).read_bytes()
        lines = _lines(data)
        if not rel.endswith(".py"):
            reach = "not-python"
        elif rel in hops:
            reach = "entry-point" if hops[rel] == 0 else "imported"
        else:
            reach = "unreachable"
        entry = {"path": rel, "facts": names, "lines": lines, "bytes": len(data), "hops": hops.get(rel), "reach": reach}
        entries.append(entry)
    sources = [f for f in files if f.endswith(SOURCE_SUFFIXES)]
    term_files = [f for f in sources if term.search((root / f).read_text(errors="replace"))]
    return {
        "task": task.id,
        "framework": framework,
        "term": term.pattern,
        "cited": entries,
        "cited_lines": sum(e["lines"] for e in entries),
        "cited_bytes": sum(e["bytes"] for e in entries),
        "term_files": len(term_files),
        "source_files": len(sources),
        "max_hops": max((e["hops"] for e in entries if e["hops"] is not None), default=None),
        "unreachable": [e["path"] for e in entries if e["reach"] == "unreachable"],
        "unmatched_facts": unmatched,
        "glob_matches": matches,
    }


def run_cost(args: argparse.Namespace, command: list[str]) -> int:
    tasks = [t for t in select_tasks(args.tasks_dir.resolve(), args.tasks)[0] if t.category == "qa"]
    if not tasks:
        raise TaskError(f"no Q&A task among {' '.join(args.tasks)}")
    args.work_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="cost-", dir=args.work_root.resolve()))
    rows, workspaces = [], {}
    try:
        for fw in args.frameworks:
            if not any(fw in t.frameworks for t in tasks):
                continue
            mode = resolve_mode(fw, args.source, args.cache_dir)
            ws = materialize(fw, scratch / fw, mode="auto" if fw == "pithtrain" else mode, cache_dir=args.cache_dir)
            files = workspace_files(ws.path)
            entry = FRAMEWORKS[fw].entry_for(ws.mode)
            if entry not in files:
                raise TaskError(f"{fw} ({ws.mode}): the entry point {entry} (frameworks.py) is not in the workspace")
            graph, unparsed = import_graph(ws.path, files)
            hops = hops_from(entry, graph)
            workspaces[fw] = {
                "mode": ws.mode,
                "version": ws.version,
                "tree_sha256": ws.tree_sha256,
                "entry_point": entry,
                "python_files": len(graph) + len(unparsed),
                "reachable_from_entry": len(hops),
                "unparsed": unparsed,
            }
            rows += [cost_row(t, fw, ws.path, files, hops) for t in tasks if fw in t.frameworks]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows.sort(key=lambda r: (r["task"], r["framework"]))
    record = {
        "schema": SCHEMA,
        **provenance(command),
        "workspaces": workspaces,
        "tasks": {
            t.id: {"dir": str(t.dir), "files": {k: v for fw in t.frameworks for k, v in t.file_hashes(fw).items()}}
            for t in tasks
        },
        "rows": rows,
    }
    path = write_record(args.out or args.results_dir / "cost", record)
    head = f"{'task':8} {'framework':12} {'files':>5} {'lines':>6} {'KB':>7} {'term files':>12}"
    print(f"{head}  import hops from the entry point")
    for r in rows:
        hops = ", ".join(f"{e['path']}: {e['hops'] if e['hops'] is not None else e['reach']}" for e in r["cited"])
        terms = f"{r['term_files']}/{r['source_files']}"
        print(
            f"{r['task']:8} {r['framework']:12} {len(r['cited']):5} {r['cited_lines']:6} "
            f"{r['cited_bytes'] / 1024:7.1f} {terms:>12}  {hops}"
        )
        for u in r["unmatched_facts"]:
            print(f"    key problem: {u}")
    for fw, w in workspaces.items():
        print(f"{fw}: {w['mode']} {w['version']} tree {w['tree_sha256'][:12]}; entry point {w['entry_point']}")
    print(f"record: {path}")
    return 0
