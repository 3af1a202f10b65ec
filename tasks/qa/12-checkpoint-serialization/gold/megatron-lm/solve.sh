#!/usr/bin/env bash
exec python3 "$GOLD_DIR/../../../render.py" "$GOLD_DIR/answer.md"
