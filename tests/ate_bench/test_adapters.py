"""Each adapter's metric extraction on a transcript fixture written to that agent's documented schema.

Fixtures: tests/fixtures/ate/transcripts/. All times are offsets from T0 = 2025-11-20T10:00:00Z.
Expected values are worked out by hand in the comments.
"""

from pathlib import Path

import pytest

from ate_bench import agents
from ate_bench.metrics import GpuUsage, compute_metrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "transcripts"
T0 = 1763632800.0
NO_GPU = GpuUsage(active_s=0.0, context_s=0.0, util_s=0.0, n_gpus=0)


def _run_dir(tmp_path: Path, **files: str) -> Path:
    for name, fixture in files.items():
        (tmp_path / name).write_text((FIXTURES / fixture).read_text())
    return tmp_path


def test_claude_code_stream_json(tmp_path):
    run = _run_dir(tmp_path, **{agents.STREAM_FILE: "claude_stream.jsonl"})
    tr = agents.parse_transcript("claude-code", run)
    # 5 assistant lines, 4 distinct message.ids (msg_01 is split over a text line and a tool_use line).
    assert len(tr.calls) == 4
    assert [c.tool_calls for c in tr.calls] == [["Bash"], ["Read"], ["Bash"], []]
    # Context = input + cache_creation + cache_read per message.id:
    #   msg_01: 3 + 5000 + 12000 = 17003    msg_02: 4 + 300 + 17000 = 17304
    #   msg_03: 2 + 150 + 17300 = 17452     msg_04: 5 + 400 + 17450 = 17855
    assert [c.input_tokens + c.cached_tokens for c in tr.calls] == [17003, 17304, 17452, 17855]
    # msg_01's two lines report output 2 then 85: the call keeps 85, counted once.
    assert tr.calls[0].output_tokens == 85
    assert tr.model == "claude-sonnet-4-5-20250929" and tr.agent_version == "2.0.14"
    assert tr.final_message.endswith("FINAL ANSWER: 1.6667")

    # The agent was launched at T0 and exited at T0 + 2202.
    m = compute_metrics(tr, T0, T0 + 2202, NO_GPU)
    assert m.agent_turns == 4
    # Median of 4 contexts = (17304 + 17452) / 2 = 17378.
    assert m.context_tokens_median == 17378
    # From the result event, not the per-call sum (85 + 60 + 120 + 300 = 565).
    assert m.output_tokens == 567
    # Gaps: 10 -> 1210 (1200 s) lies inside toolu_03 (Bash 10..1210): counted in full;
    # 1210 -> 2200 (990 s) with no tool running: capped at 600. 2202 - 990 + 600 = 1812.
    assert m.session_duration_s == pytest.approx(1812.0)


def test_codex_exec_json_and_rollout(tmp_path):
    run = _run_dir(tmp_path, **{agents.STREAM_FILE: "codex_stream.jsonl", agents.ROLLOUT_FILE: "codex_rollout.jsonl"})
    tr = agents.parse_transcript("codex", run)
    # token_count events: one with info null (skipped), three with a new cumulative total, and one
    # repeat of the second total at +12.1 s (skipped): 3 model calls.
    assert len(tr.calls) == 3
    assert [c.tool_calls for c in tr.calls] == [["shell"], ["shell"], []]
    # last_token_usage input_tokens include the cached ones: uncached = input - cached.
    #   call 1: 8000 - 0 = 8000 + 0       call 2: 9000 - 7000 = 2000 + 7000
    #   call 3: 13000 - 12000 = 1000 + 12000
    assert [(c.input_tokens, c.cached_tokens) for c in tr.calls] == [(8000, 0), (2000, 7000), (1000, 12000)]
    assert tr.model == "gpt-5-codex" and tr.agent_version == "0.46.0"
    assert tr.final_message == "Done.\nFINAL ANSWER: 1.6667"
    assert tr.notes == []  # turn.completed output (900) equals the rollout's sum 200 + 300 + 400

    m = compute_metrics(tr, T0, T0 + 60, NO_GPU)
    assert m.agent_turns == 3
    # Contexts 8000, 9000, 13000: median 9000.
    assert m.context_tokens_median == 9000
    # turn.completed usage.output_tokens.
    assert m.output_tokens == 900
    # No gap over 600 s: the whole 60 s.
    assert m.session_duration_s == pytest.approx(60.0)
    # call_2 (shell) ran from +12 to +40.
    assert [(s.name, s.start - T0, s.end - T0) for s in tr.tool_spans][1] == pytest.approx(("shell", 12.0, 40.0))


def test_mini_swe_agent_trajectory(tmp_path):
    run = _run_dir(tmp_path, **{agents.TRAJECTORY_FILE: "mini_trajectory.json"})
    tr = agents.parse_transcript("mini-swe-agent", run)
    # Three assistant messages, one bash action each.
    assert len(tr.calls) == 3
    assert [c.tool_calls for c in tr.calls] == [["bash"]] * 3
    # litellm's prompt_tokens include prompt_tokens_details.cached_tokens:
    #   1500 = 1500 + 0, 2600 = 1200 + 1400, 3000 = 500 + 2500
    assert [(c.input_tokens, c.cached_tokens) for c in tr.calls] == [(1500, 0), (1200, 1400), (500, 2500)]
    assert tr.model == "anthropic/claude-sonnet-4-5-20250929" and tr.agent_version == "2.0.0"
    assert tr.final_message == "FINAL ANSWER: 1.6667\n"

    m = compute_metrics(tr, T0, T0 + 1502, NO_GPU)
    assert m.agent_turns == 3
    assert m.context_tokens_median == 2600  # median of 1500, 2600, 3000
    assert m.output_tokens == 250  # 80 + 120 + 50 completion tokens
    # Gaps: 10 -> 700 (690 s) inside the ./train.sh action (10..700): full; 700 -> 1500 (800 s) idle:
    # 600. 1502 - 800 + 600 = 1302.
    assert m.session_duration_s == pytest.approx(1302.0)


def test_mini_swe_agent_v1_trajectory_is_refused(tmp_path):
    (tmp_path / agents.TRAJECTORY_FILE).write_text('{"trajectory_format": "mini-swe-agent-1", "messages": []}')
    with pytest.raises(ValueError, match="mini-swe-agent-1.1"):
        agents.parse_transcript("mini-swe-agent", tmp_path)


def test_claude_stream_cut_short_by_timeout(tmp_path):
    # A killed run: no result event, one tool still running. Output falls back to the per-call sum,
    # the open tool ends at the last event, and both are noted.
    lines = (FIXTURES / "claude_stream.jsonl").read_text().splitlines()[:7]  # up to msg_03's tool_use
    (tmp_path / agents.STREAM_FILE).write_text("\n".join(lines) + "\n")
    tr = agents.parse_transcript("claude-code", tmp_path)
    assert tr.output_tokens_total == 85 + 60 + 120
    assert tr.tool_spans[-1].name == "Bash" and tr.tool_spans[-1].end == tr.tool_spans[-1].start
    assert any("no result event" in n for n in tr.notes)
    assert any("had no result" in n for n in tr.notes)


def test_unknown_agent_lists_known(tmp_path):
    with pytest.raises(ValueError, match="known: claude-code, codex, mini-swe-agent, gold, noop"):
        agents.parse_transcript("aider", tmp_path)
