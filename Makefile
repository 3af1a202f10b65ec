# `make test` works on a fresh clone: it makes .venv with nox, and nox makes the test environment.
VENV := .venv
NOX := $(VENV)/bin/nox

.PHONY: test test-all lint
$(NOX):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q nox

test: $(NOX)
	$(NOX) -s tests

test-all: $(NOX)
	$(NOX) -s tests -- -m ""

lint: $(NOX)
	$(NOX) -s lint
