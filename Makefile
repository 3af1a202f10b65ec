# `make test` works on a fresh clone: it makes .venv with nox, and nox makes the test environment.
VENV := .venv
NOX := $(VENV)/bin/nox

.PHONY: test test-all lint reproduce kick-tires archive agents
$(NOX):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --progress-bar on nox

test: $(NOX)
	$(NOX) -s tests

test-all: $(NOX)
	$(NOX) -s tests -- -m ""

lint: $(NOX)
	$(NOX) -s lint

# Every table and figure of the paper: what this machine can run, then the figures into build/paper/ and the
# comparison with the committed reference paper/outputs/ (never overwritten). The last line is the true total.
reproduce:
	@t0=$$(date +%s); echo "[reproduce] set-up: .venv with nox, then nox's environment (minutes on a fresh clone)"; \
	$(MAKE) --no-print-directory $(NOX) && $(NOX) -s reproduce; rc=$$?; \
	echo "[reproduce] total $$(( $$(date +%s) - t0 )) s from make's start, set-up included (exit $$rc)"; exit $$rc

# A labelled subset in under 10 minutes: code size, Q&A checker validation and costs on pithtrain, smoke throughput.
kick-tires:
	@t0=$$(date +%s); echo "[kick-tires] set-up: .venv with nox, then nox's environment (minutes on a fresh clone)"; \
	$(MAKE) --no-print-directory $(NOX) && $(NOX) -s reproduce -- --kick-tires; rc=$$?; \
	echo "[kick-tires] total $$(( $$(date +%s) - t0 )) s from make's start, set-up included (exit $$rc)"; exit $$rc

# A versioned source tarball for deposit (Zenodo and the like), with its sha256 beside it. ARCHIVE_STAMP inside
# it names the commit, so every command of the README works from the unpacked archive without .git.
archive:
	@git diff --quiet HEAD -- . ':!results' || { echo "make archive: uncommitted changes; commit them first (the archive holds HEAD only)"; exit 2; }
	@mkdir -p dist
	@name=pithtrain-$$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)-$$(git rev-parse --short=10 HEAD); \
	git archive --format=tar.gz --prefix=$$name/ -o dist/$$name.tar.gz HEAD && \
	(cd dist && sha256sum $$name.tar.gz > $$name.tar.gz.sha256) && \
	echo "dist/$$name.tar.gz" && cat dist/$$name.tar.gz.sha256

# The agent CLIs ATE-Bench drives, at pinned versions, into .agents/ (ignored; the harness uses them where PATH has
# none). Node and npm from the system. Nothing is downloaded when a run starts.
CLAUDE_CODE_VERSION := 2.1.328
CODEX_VERSION := 0.171.0
MINI_SWE_AGENT_VERSION := 2.4.6
agents:
	npm install --prefix .agents/npm --no-audit --no-fund --save-exact \
	  @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION)
	python3 -m venv .agents/mini
	.agents/mini/bin/pip install -q mini-swe-agent==$(MINI_SWE_AGENT_VERSION)
