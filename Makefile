# `make test` works on a fresh clone: it makes .venv with nox, and nox makes the test environment.
VENV := .venv
NOX := $(VENV)/bin/nox

.PHONY: test test-all lint reproduce kick-tires agents
$(NOX):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q nox

test: $(NOX)
	$(NOX) -s tests

test-all: $(NOX)
	$(NOX) -s tests -- -m ""

lint: $(NOX)
	$(NOX) -s lint

# Every table and figure of the paper (paper/README.md): what this machine can run, then the figures.
reproduce: $(NOX)
	$(NOX) -s reproduce

# A labelled subset in under 10 minutes: code size, Q&A checker validation and costs on pithtrain, smoke throughput.
kick-tires: $(NOX)
	$(NOX) -s reproduce -- --kick-tires

# The agent CLIs ATE-Bench drives, at pinned versions, into .agents/ (ignored; the harness looks there before PATH).
# Node and npm from the system. Nothing is downloaded when a run starts.
CLAUDE_CODE_VERSION := 2.1.328
CODEX_VERSION := 0.171.0
MINI_SWE_AGENT_VERSION := 2.4.6
agents:
	npm install --prefix .agents/npm --no-audit --no-fund --save-exact \
	  @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION)
	python3 -m venv .agents/mini
	.agents/mini/bin/pip install -q mini-swe-agent==$(MINI_SWE_AGENT_VERSION)
