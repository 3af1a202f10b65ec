"""AGENTS.md is read by the coding agents that ATE-Bench measures: it must say nothing about the benchmark,
its tasks or its harness, so that a run with and without skills differs in the skills alone."""

import re

from conftest import REPO

BENCHMARK_WORDS = (
    r"ate[_-]bench|ATE-Bench|\bATE\b|agent-task efficiency|tasks/(qa|operate|feature)|checker|gold solution"
)


def test_agents_md_says_nothing_about_the_benchmark():
    text = (REPO / "AGENTS.md").read_text()
    hits = [m.group(0) for m in re.finditer(BENCHMARK_WORDS, text, re.I)]
    assert not hits, f"AGENTS.md mentions the benchmark: {hits}"


def test_the_check_can_fail():
    assert re.search(BENCHMARK_WORDS, "see ate_bench/README.md", re.I)
