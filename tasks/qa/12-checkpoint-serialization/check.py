"""Checks a Q&A answer against this task's key.toml (tasks/qa/qa_check.py does the work)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import qa_check  # noqa: E402

raise SystemExit(qa_check.main(Path(__file__).with_name("key.toml")))
