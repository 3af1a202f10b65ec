# `make test` works on a fresh clone: it makes .venv with nox, and nox makes the test environment.
VENV := .venv
NOX := $(VENV)/bin/nox

.PHONY: test test-all lint reproduce kick-tires
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
