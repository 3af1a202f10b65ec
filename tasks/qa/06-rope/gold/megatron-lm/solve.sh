#!/usr/bin/env bash
# The gold final message: answer.md with its [[PATH#REGEX]] anchors resolved in the workspace (cwd).
exec python3 "$GOLD_DIR/../../../render.py" "$GOLD_DIR/answer.md"
