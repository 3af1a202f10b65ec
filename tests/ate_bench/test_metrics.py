"""The 600 s idle-gap rule of the session duration."""

import pytest

from ate_bench.metrics import ToolSpan, session_duration_s


def test_no_gap_over_600_counts_wall_time():
    assert session_duration_s(0.0, 1000.0, [100.0, 500.0, 900.0], []) == pytest.approx(1000.0)


def test_idle_gap_is_capped_at_600():
    # 0 -> 100 -> 1100 -> 1200: the 1000 s gap counts 600. 100 + 600 + 100 = 800.
    assert session_duration_s(0.0, 1200.0, [100.0, 1100.0], []) == pytest.approx(800.0)


def test_gap_spanned_by_a_tool_call_counts_in_full():
    # A 1000 s training run from 100 to 1100: the gap is the agent waiting on its tool.
    spans = [ToolSpan("Bash", 100.0, 1100.0)]
    assert session_duration_s(0.0, 1200.0, [100.0, 1100.0], spans) == pytest.approx(1200.0)


def test_tool_endpoints_are_events():
    # No other events: the tool's own start and end split 0..3000 into 0-100 (100), 100-2000 (tool:
    # 1900) and 2000-3000 (idle 1000 -> 600). 100 + 1900 + 600 = 2600.
    spans = [ToolSpan("Bash", 100.0, 2000.0)]
    assert session_duration_s(0.0, 3000.0, [], spans) == pytest.approx(2600.0)


def test_each_idle_gap_capped_separately():
    # Two idle gaps of 700 s and 2000 s: 600 + 600, plus 10 s of activity between them.
    assert session_duration_s(0.0, 2710.0, [700.0, 710.0], []) == pytest.approx(1210.0)


def test_events_outside_the_session_are_ignored():
    assert session_duration_s(10.0, 20.0, [0.0, 15.0, 5000.0], []) == pytest.approx(10.0)
