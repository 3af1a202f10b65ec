"""Measure code size and indirection in each framework's main package; write one record.

    python paper/measure_code_size.py [--out results/code_size] [--cache-dir ~/.cache/pithtrain-ate]

The trees are the ones ATE-Bench's agents see (`ate_bench.workspace.materialize(..., mode="pypi")`):
pithtrain at HEAD (git archive), torchtitan 0.3.0 and megatron-core 0.19.2 from their PyPI sdists.
DeepSpeed, which the paper counts but ATE-Bench does not run, comes from its PyPI sdist, pinned below by
version and sha256 and cached beside the others.

What is counted (physical lines: every line of the file, as the paper counts):
- Python: `*.py` under the main package (`pithtrain/`, `torchtitan/`, `megatron/`, `deepspeed/`).
- C++/CUDA: `*.c *.cc *.cpp *.cxx *.h *.hpp *.cu *.cuh` anywhere in the tree: compiled extensions live
  outside the package in some of them (DeepSpeed's `csrc/`), and a rebuild cycle is a rebuild cycle.
- Indirection: Python lines under the package matching each pattern of PATTERNS (below), a measured
  stand-in for the paper's "registries and runtime specs" (principle 3). Torch's own `register_*` APIs
  (buffers, parameters, hooks, custom-op fakes, FSDP methods) are not registries and are left out.
- Skills: `SKILL.md` files anywhere in the tree; `AGENTS.md` at its root.
"""

import argparse
import json
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ate_bench.source_stamp import tree_commit  # noqa: E402
from ate_bench.workspace import DEFAULT_CACHE_DIR, file_sha256, materialize  # noqa: E402

SCHEMA = "pithtrain-code-size-1"
PACKAGES = {"pithtrain": "pithtrain", "torchtitan": "torchtitan", "megatron-lm": "megatron", "deepspeed": "deepspeed"}
DEEPSPEED = (
    "deepspeed==0.19.8",
    "deepspeed-0.19.8.tar.gz",
    "9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af",
)
CPP_CUDA = {".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh"}
# torch's own registration APIs (buffers, parameters, hooks, custom-op fakes/autograd, FSDP methods).
TORCH_REGISTER = r"(?!buffer|parameter|module|\w*hook|\w*state_dict|fake|autograd|kernel|fsdp)"
PATTERNS = {
    # Classes or functions entered into a table and looked up later by name.
    "registry": rf"\bregister_{TORCH_REGISTER}\w*\s*\("
    rf"|@\w+(?:\.\w+)*\.register(?:_{TORCH_REGISTER}\w*)?\b"
    r"|\b\w*(?:REGISTRY|[Rr]egistry)\b",
    # Layers chosen at run time by a spec object rather than constructed directly.
    "runtime_spec": r"\bModuleSpec\b|\bbuild_module\s*\(|\bsubmodules\.\w+|\b\w+_spec\s*\(|\bTrainSpec\b",
    # Code found by a string at run time.
    "string_import": r"\bimport_module\s*\(|\b__import__\s*\(|\blocate\s*\(",
}


def deepspeed_sdist(cache_dir: Path) -> Path:
    """The pinned DeepSpeed sdist from the cache, or downloaded by pip and checked against the sha256."""
    requirement, filename, digest = DEEPSPEED
    cached = cache_dir / "pypi" / filename
    if cached.is_file() and file_sha256(cached) == digest:
        print(f"code size: {filename} from the cache ({cached})", flush=True)
        return cached
    print(f"code size: downloading {requirement} (sdist, sha256 {digest[:12]}...) with pip", flush=True)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--ignore-requires-python"]
        subprocess.run([*cmd, "-d", tmp, requirement], check=True)
        got = Path(tmp) / filename
        if file_sha256(got) != digest:
            raise SystemExit(f"{filename}: sha256 {file_sha256(got)} does not match the pin {digest}")
        got.replace(cached)
    return cached


def count_tree(root: Path, package: str) -> dict:
    pkg = root / package
    if not pkg.is_dir():
        raise SystemExit(f"{root}: no main package {package}/ (is the tree what the harness materializes?)")
    regexes = {name: re.compile(p) for name, p in PATTERNS.items()}
    py_files = sorted(pkg.rglob("*.py"))
    py_lines, hits, sub = 0, dict.fromkeys(PATTERNS, 0), {}
    for path in py_files:
        lines = path.read_text(errors="replace").splitlines()
        py_lines += len(lines)
        part = path.relative_to(pkg).parts
        key = part[0] if len(part) > 1 else "(top level)"
        sub[key] = sub.get(key, 0) + len(lines)
        for line in lines:
            for name, rx in regexes.items():
                hits[name] += bool(rx.search(line))
    native = [p for p in sorted(root.rglob("*")) if p.suffix in CPP_CUDA and p.is_file() and ".git" not in p.parts]
    return {
        "package": package,
        "python_files": len(py_files),
        "python_lines": py_lines,
        "cpp_cuda_files": len(native),
        "cpp_cuda_lines": sum(len(p.read_text(errors="replace").splitlines()) for p in native),
        "patterns": hits,
        "python_lines_by_subpackage": dict(sorted(sub.items())),
        "skills": len([p for p in root.rglob("SKILL.md") if ".git" not in p.parts]),
        "agents_md": (root / "AGENTS.md").is_file(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "results" / "code_size")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fw in ("pithtrain", "torchtitan", "megatron-lm"):
            print(f"code size: materializing {fw} (pypi mode)", flush=True)
            ws = materialize(fw, Path(tmp) / fw, mode="pypi", cache_dir=args.cache_dir)
            source = {"mode": ws.mode, "version": ws.version, "tree_sha256": ws.tree_sha256, **ws.source}
            rows.append({"framework": fw, "source": source, **count_tree(ws.path, PACKAGES[fw])})
        sdist = deepspeed_sdist(args.cache_dir)
        dest = Path(tmp) / "deepspeed"
        with tarfile.open(sdist) as tar:
            tar.extractall(dest, filter="data")
        (top,) = dest.iterdir()
        source = {"mode": "pypi", "version": DEEPSPEED[0], "sdist": DEEPSPEED[1], "sha256": DEEPSPEED[2]}
        rows.append({"framework": "deepspeed", "source": source, **count_tree(top, PACKAGES["deepspeed"])})
    head, _ = tree_commit(REPO)
    now = datetime.now(UTC)
    record = {
        "schema": SCHEMA,
        "date": now.isoformat(timespec="seconds"),
        "git_commit": head,
        "command": "python " + " ".join([Path(sys.argv[0]).resolve().relative_to(REPO).as_posix(), *sys.argv[1:]]),
        "host": {"node": platform.node(), "python": platform.python_version()},
        "patterns": PATTERNS,
        "frameworks": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    for r in rows:
        print(f"code size: {r['framework']:12} {r['python_lines']:>7} Python, {r['cpp_cuda_lines']:>7} C++/CUDA lines")
    print(f"code size: wrote {path}")


if __name__ == "__main__":
    main()
