"""Strict loading of TOML run configs into typed dataclasses.

Every subsystem has a `*Cfg` dataclass whose fields carry a one-line docstring. Types are
checked exactly (an int is not a float's stand-in for a bool, a string is never coerced), ranges
come from `Annotated[..., Range(...)]`, and choices from `Literal[...]`. Any violation raises
`ConfigError` naming the key, the value and what is allowed; the CLI turns it into exit status 2.
"""

import dataclasses
import math
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal


class UserInputError(ValueError):
    """Bad user input (config, data, checkpoint). The CLI prints the message and exits with status 2."""


class ConfigError(UserInputError):
    pass


@dataclass(frozen=True)
class Range:
    """Allowed interval for a numeric knob; `None` leaves that side open."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None

    def check(self, key: str, value: float) -> None:
        ok = (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
        )
        if not ok:
            raise ConfigError(f"config key '{key}' = {value!r} is out of range: allowed {self.describe()}.")

    def describe(self) -> str:
        parts = [
            f">= {self.ge}" if self.ge is not None else "",
            f"> {self.gt}" if self.gt is not None else "",
        ]
        parts.append(f"<= {self.le}" if self.le is not None else "")
        return " and ".join(p for p in parts if p)


Positive = Annotated[int, Range(ge=1)]
NonNegative = Annotated[int, Range(ge=0)]


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    return {type(None): "none"}.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(key: str, value: Any, tp: Any) -> Any:
    """Check `value` against the annotation `tp`; return it (lists as lists, ints widened to float)."""
    origin = typing.get_origin(tp)
    if tp is Any:  # checked by its own loader (the [model] table, by family)
        return value
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        value = _convert(key, value, base)
        for extra in extras:
            if isinstance(extra, Range):
                extra.check(key, value)
        return value
    if origin is Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool) != any(
            isinstance(a, bool) for a in typing.get_args(tp)
        ):
            raise ConfigError(f"config key '{key}' = {value!r} is not allowed: use {_type_name(tp)}.")
        return value
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            try:
                return _convert(key, value, arm)
            except ConfigError:
                pass
        raise ConfigError(f"config key '{key}' = {value!r} has the wrong type: expected {_type_name(tp)}.")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"config key '{key}' = {value!r} has the wrong type: expected {_type_name(tp)}.")
        return [_convert(f"{key}[{i}]", v, typing.get_args(tp)[0]) for i, v in enumerate(value)]
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"config key '{key}' must be a table ([{key}]), got {value!r}.")
        return load_dataclass(tp, value, prefix=f"{key}.")
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"config key '{key}' = {value!r}: expected none.")
        return None
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"config key '{key}' = {value!r} is not a finite number: use a finite value.")
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ConfigError(
            f"config key '{key}' = {value!r} has the wrong type: expected {_type_name(tp)}, got {type(value).__name__}."
        )
    return value


def load_dataclass(cls: type, table: dict[str, Any], prefix: str = "") -> Any:
    """Build `cls` from a TOML table; unknown keys, wrong types and out-of-range values raise ConfigError."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise ConfigError(f"unknown config key '{prefix}{unknown[0]}'. Allowed keys here: {', '.join(sorted(fields))}.")
    kwargs = {}
    for name, f in fields.items():
        if name in table:
            kwargs[name] = _convert(prefix + name, table[name], hints[name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"config key '{prefix}{name}' is required ({_type_name(hints[name])}).")
    return cls(**kwargs)


def apply_overrides(table: dict[str, Any], overrides: list[str]) -> None:
    """Apply `section.key=value` overrides in place; the value is parsed as TOML, else taken as a string."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set '{item}' is malformed: use --set section.key=value.")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        *parents, leaf = key.strip().split(".")
        node = table
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set '{item}': '{part}' is not a section.")
        node[leaf] = value


def read_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file '{path}' does not exist. Pass the path of a TOML file, e.g. examples/*.toml.")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config file '{path}' is not UTF-8 text (byte {e.start} is {e.object[e.start : e.start + 1]!r}): "
            f"TOML is UTF-8; pass a TOML file, e.g. examples/*.toml."
        ) from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file '{path}' is not valid TOML: {e}. Fix the syntax at that line.") from e


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstrings written under each field of a config dataclass."""
    import ast
    import inspect

    docs = {}
    for klass in reversed(cls.__mro__[:-1]):
        try:
            body = ast.parse(inspect.getsource(klass)).body[0].body
        except (OSError, TypeError):
            continue
        for node, nxt in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                docs[node.target.id] = str(nxt.value.value).strip()
    return docs


def describe_config(cls: type, prefix: str = "") -> list[str]:
    """One line per knob, `section.key (type, default): doc`, for --help."""
    hints = typing.get_type_hints(cls, include_extras=True)
    docs = field_docs(cls)
    lines = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        base = typing.get_args(tp)[0] if typing.get_origin(tp) is Annotated else tp
        if dataclasses.is_dataclass(base):
            lines += describe_config(base, f"{prefix}{f.name}.")
            continue
        if base is Any:
            continue
        default = f.default if f.default is not dataclasses.MISSING else "required"
        lines.append(f"  {prefix}{f.name} ({_type_name(base)}, default {default!r}): {docs.get(f.name, '')}")
    return lines
