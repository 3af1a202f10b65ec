"""A near miss made from a gold: run the gold (the solve.sh beside PATCH) in the workspace, then replace OLD by NEW
in the files PATCH touches, where OLD must occur exactly once; otherwise exit 1 naming PATCH (the gold changed:
update the wrong case that calls this).

    python3 break_gold.py PATCH OLD NEW     (cwd: the workspace, as for the gold)
"""

import os
import re
import subprocess
import sys
from pathlib import Path


def main(patch: Path, old: str, new: str) -> int:
    gold_dir = patch.resolve().parent
    subprocess.run(["bash", str(gold_dir / "solve.sh")], env={**os.environ, "GOLD_DIR": str(gold_dir)}, check=True)
    files = re.findall(r"^\+\+\+ b/(\S+)$", patch.read_text(), flags=re.M)
    hits = [Path(f) for f in files if Path(f).read_text().count(old)]
    counts = sum(p.read_text().count(old) for p in hits)
    if counts != 1:
        print(
            f"{patch}: {old!r} occurs {counts} times in {', '.join(files)}, not once: the gold changed, update the "
            "wrong case",
            file=sys.stderr,
        )
        return 1
    hits[0].write_text(hits[0].read_text().replace(old, new))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
