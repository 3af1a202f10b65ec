"""Render a gold answer's anchors to citations of the workspace (cwd): `python3 render.py ANSWER.md`.

`[[PATH#REGEX]]` becomes `PATH:N`, N the first line of PATH matching REGEX; `[[PATH#REGEX1..REGEX2]]`
becomes `PATH:N1-N2`, N2 the first line at or after N1 matching REGEX2 (the first `..` splits the two,
and a regex may not contain an unescaped `]]`). Regexes are case-sensitive `re.search`es, lines numbered as
`grep -n` numbers them. So a pithtrain gold names symbols and follows the code as it moves, while its
prose stays a real answer. An anchor that does not resolve is an error: exit 1, naming it.
"""

import re
import sys
from pathlib import Path

from qa_check import read_lines

# The body takes a backslash and the character after it as one unit, so `\]` before the closing `]]` stays in it.
ANCHOR = re.compile(r"\[\[(?P<path>[^#\[\]\s]+)#(?P<body>(?:\\.|[^\\\n])+?)\]\]")


class AnchorError(ValueError):
    pass


def _first(lines: list[str], regex: str, start: int, anchor: str) -> int:
    try:
        pattern = re.compile(regex)
    except re.error as e:
        raise AnchorError(f"{anchor}: {regex!r} is not a valid regex: {e}") from e
    for i in range(start, len(lines)):
        if pattern.search(lines[i]):
            return i + 1
    raise AnchorError(f"{anchor}: no line at or after {start + 1} matches {regex!r}")


def _resolve(m: re.Match, root: Path) -> str:
    anchor, path = m[0], m["path"]
    file = root / path
    if not file.is_file():
        raise AnchorError(f"{anchor}: {path} is not a file under {root}")
    lines = read_lines(file)
    first, sep, second = m["body"].partition("..")
    n1 = _first(lines, first, 0, anchor)
    if not sep:
        return f"{path}:{n1}"
    return f"{path}:{n1}-{_first(lines, second, n1 - 1, anchor)}"


def render(text: str, root: Path) -> str:
    """`text` with every anchor replaced; AnchorError lists every anchor that does not resolve."""
    errors: list[str] = []

    def one(m: re.Match) -> str:
        try:
            return _resolve(m, root)
        except AnchorError as e:
            errors.append(str(e))
            return m[0]

    out = ANCHOR.sub(one, text)
    if errors:
        raise AnchorError("\n".join(errors))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: render.py ANSWER.md  (run in the workspace root)", file=sys.stderr)
        return 2
    try:
        out = render(Path(argv[0]).read_text(), Path.cwd())
    except AnchorError as e:
        print(f"render: anchors that do not resolve in {Path.cwd()}:\n{e}", file=sys.stderr)
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
