"""qa-06's checker: the shared tasks/qa/qa_check.py against this directory's key.toml."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import qa_check  # noqa: E402

raise SystemExit(qa_check.main(Path(__file__).resolve().with_name("key.toml")))
