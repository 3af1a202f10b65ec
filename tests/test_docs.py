"""README.md and AGENTS.md stay true: every file path they quote exists, and every Python name and config key
they quote resolves: names by importing pithtrain's modules (and the test helpers) and looking them up, dotted
names by getattr along the chain, `section.key` against the config dataclasses."""

import dataclasses
import functools
import importlib
import inspect
import pkgutil
import re
import typing
from collections import Counter, defaultdict

import pytest
import torch
from conftest import REPO

import pithtrain
from pithtrain.models import KNOWN_FAMILIES, model_family
from pithtrain.tasks.pretrain_lm import PretrainLMCfg

TOP = ("pithtrain/", "tests/", "examples/", "benchmarks/", "ate_bench/", "skills/", "tasks/", "paper/", ".ci/")
FILE_SUFFIXES = (".py", ".md", ".json", ".jsonl", ".toml", ".sh", ".png", ".txt", ".bin")


def quoted(doc: str) -> list[str]:
    return [t.rstrip(".,:;") for t in re.findall(r"`([^`\s]+)`", (REPO / doc).read_text())]


def config_sections() -> dict[str, set[str]]:
    """Every config key by section: the run config's dataclasses, `model` from every family."""
    hints = typing.get_type_hints(PretrainLMCfg)
    sections = {f.name: {g.name for g in dataclasses.fields(hints[f.name])} for f in dataclasses.fields(PretrainLMCfg)
                if dataclasses.is_dataclass(hints[f.name])}  # fmt: skip
    sections["model"] = {f.name for n in KNOWN_FAMILIES for f in dataclasses.fields(model_family(n).cfg_class)}
    return sections


@functools.cache
def namespace():
    """(scopes: a name -> the objects it may denote, for dotted names; bare: every name defined anywhere in them)."""
    modules = [importlib.import_module(i.name) for i in pkgutil.walk_packages(pithtrain.__path__, "pithtrain.")]
    modules += [importlib.import_module(n) for n in ("conftest", "distributed_helpers", "hf_parity", "triton_child")]
    scopes = defaultdict(list, {"pithtrain": [pithtrain], "torch": [torch], "nn": [torch.nn]})
    bare = set()
    for m in modules:
        scopes[m.__name__.rsplit(".", 1)[-1]].append(m)
        bare |= set(vars(m))
        for obj in vars(m).values():
            if getattr(obj, "__module__", None) != m.__name__:
                continue
            if isinstance(obj, type):
                scopes[obj.__name__].append(obj)
                bare |= (
                    set(dir(obj)) | {f.name for f in dataclasses.fields(obj)}
                    if dataclasses.is_dataclass(obj)
                    else set(dir(obj))
                )
            for fn in [obj, *vars(obj).values()] if isinstance(obj, type) else [obj]:
                if inspect.isfunction(fn):
                    bare |= set(inspect.signature(fn).parameters)
    for name in KNOWN_FAMILIES:  # attributes set in __init__ exist only on instances: build a small model
        family = model_family(name)
        cfg = family.cfg_class(vocab_size=64, hidden_size=16, num_hidden_layers=2)
        model = family.model_class(cfg)
        scopes["model"].append(model)
        for module in model.modules():
            bare |= set(vars(module)) | set(module._parameters) | set(module._modules)
    return scopes, bare


def resolves(token: str, scopes, bare, sections) -> bool:
    parts = token.removesuffix("()").split(".")
    if len(parts) == 2 and parts[1] in sections.get(parts[0], ()):
        return True
    if len(parts) == 1:
        return parts[0] in bare or any(parts[0] in keys for keys in sections.values())

    def chain(obj, rest):
        return not rest or (hasattr(obj, rest[0]) and chain(getattr(obj, rest[0]), rest[1:]))

    return any(chain(obj, parts[1:]) for obj in scopes.get(parts[0], []))


def is_code_name(token: str) -> bool:
    """A Python name or dotted name as docs write them; file names, env vars and bare lowercase words are not."""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\(\))?", token) or token.endswith(FILE_SUFFIXES):
        return False
    return not token.isupper() and ("_" in token or "." in token or token[0].isupper())


@pytest.mark.parametrize("doc", ["README.md", "AGENTS.md"])
def test_quoted_paths_and_names_exist(doc):
    scopes, bare = namespace()
    sections = config_sections()
    missing = []
    for token in quoted(doc):
        if token.startswith(TOP):
            path = token.split(":")[0]
            if "*" not in path and "<" not in path and not (REPO / path).exists():
                missing.append(path)
        elif is_code_name(token) and not token.startswith("test_") and not resolves(token, scopes, bare, sections):
            missing.append(token)
    assert not missing, f"{doc} names what does not exist: {missing}"


def test_resolution_can_fail():
    scopes, bare = namespace()
    sections = config_sections()
    for wrong in ["training.max_stepz", "model.no_such_key", "DualPipeV.no_such_method", "no_such_function",
                  "NoSuchCfg", "distributed.no_such_group", "model.model.no_such_part"]:  # fmt: skip
        assert is_code_name(wrong) and not resolves(wrong, scopes, bare, sections), wrong
    for right in ["training.max_steps", "model.n_routed_experts", "DualPipeV.step", "distributed.cp_group"]:
        assert resolves(right, scopes, bare, sections), right


# Code in pithtrain/ that nothing but tests calls is dead weight; each exception says why it stays.
USED_BY_TESTS_ONLY = {"zigzag_gather": "the inverse of zigzag_split, by which the tests check it"}


def test_no_engine_code_is_used_only_by_tests():
    words = Counter(w for d in ("pithtrain", "benchmarks") for p in (REPO / d).rglob("*.py")
                    for w in re.findall(r"\w+", p.read_text()))  # fmt: skip
    unused = []
    for path in (REPO / "pithtrain").rglob("*.py"):
        for name in re.findall(r"^(?:def|class)\s+([A-Za-z]\w*)", path.read_text(), re.M):
            if words[name] <= 1 and name not in USED_BY_TESTS_ONLY:
                unused.append(f"{path.relative_to(REPO)}:{name}")
    assert not unused, f"defined in pithtrain/ but used nowhere in pithtrain/ or benchmarks/: {unused}"


def test_no_measured_rates_in_engine_code():
    """One day's GPU figures go stale in docstrings: they live in benchmarks/NOTES.md, which code points to."""
    quoted_rates = [f"{p.relative_to(REPO)}: {m}" for p in (REPO / "pithtrain").rglob("*.py")
                    for m in re.findall(r"\d\s*[PT]FLOP/s", p.read_text())]  # fmt: skip
    assert not quoted_rates, quoted_rates
