"""The five ATE-Bench effort metrics, computed from one normalised transcript.

Every agent adapter (agents.py) turns its agent's own transcript into a `Transcript`: one `ModelCall`
per model response and one `ToolSpan` per tool execution. The metrics below read only that, so the
five numbers mean the same thing for every agent. They are never folded into one score (paper,
"ATE-Bench": "Metrics, never folded into one score, median of 3 runs").

Token convention: `input_tokens` is the uncached part of the prompt and `cached_tokens` the part served
from a prompt cache, so `input_tokens + cached_tokens` is the whole context the model read. Anthropic
reports them apart (cache writes count as uncached input); OpenAI reports `input_tokens` that already
include `cached_input_tokens`, and the Codex adapter subtracts.
"""

import statistics
from dataclasses import dataclass, field

# Paper: "idle gaps over 600 s count as 600 s unless a tool call spans them".
IDLE_GAP_CAP_S = 600.0


@dataclass
class ModelCall:
    """One model response (one agent turn)."""

    t: float
    """Unix time the response arrived."""
    input_tokens: int
    """Uncached prompt tokens (Anthropic cache writes included)."""
    cached_tokens: int
    """Prompt tokens read from the provider's prompt cache."""
    output_tokens: int
    """Tokens the model generated in this response (reasoning included)."""
    tool_calls: list[str] = field(default_factory=list)
    """Names of the tools this response asked for, in order."""


@dataclass
class ToolSpan:
    """One tool execution, from the response that asked for it to the result the agent read."""

    name: str
    start: float
    end: float


@dataclass
class Transcript:
    """An agent's session, normalised."""

    calls: list[ModelCall]
    tool_spans: list[ToolSpan]
    event_times: list[float]
    """Every timestamped event of the session (stream lines, messages, tool results)."""
    output_tokens_total: int
    """Authoritative output total: the agent's own final count where it reports one."""
    model: str = ""
    final_message: str = ""
    notes: list[str] = field(default_factory=list)
    agent_version: str = ""
    """As the transcript states it (Claude Code's init event, Codex's session_meta, mini's info)."""


@dataclass
class GpuUsage:
    """What the GPU sampler measured for the agent's processes (gpu.py)."""

    active_s: float
    """Wall seconds during which at least one agent process held a GPU context."""
    context_s: float
    """Per-GPU seconds of held contexts, summed over GPUs."""
    util_s: float
    """Per-GPU utilisation-weighted seconds (util% / 100 x dt) while the agent held the GPU, summed."""
    n_gpus: int
    notes: list[str] = field(default_factory=list)


@dataclass
class Metrics:
    """The five effort metrics of one run."""

    session_duration_s: float
    """Agent launch to exit; idle gaps over 600 s count as 600 s unless a tool call spans them."""
    active_gpu_s: float
    """Wall time the agent's training/verification runs held a GPU (0 with a note when no GPU)."""
    agent_turns: int
    """Model calls."""
    context_tokens_median: float
    """Median over calls of input + cached tokens."""
    output_tokens: int
    """Tokens the model generated over the session."""
    gpu: GpuUsage
    notes: list[str] = field(default_factory=list)


def session_duration_s(start: float, end: float, event_times: list[float], spans: list[ToolSpan]) -> float:
    """Wall time from `start` to `end` with each idle gap over 600 s counted as 600 s.

    A gap is the time between two consecutive events. Tool starts and ends are events themselves, so a
    gap lies either wholly inside a tool span (the agent was waiting on its tool: counted in full) or
    wholly outside every span (the agent was idle: capped).
    """
    assert end >= start, (start, end)
    span_ends = [t for s in spans for t in (s.start, s.end)]
    times = sorted({start, end, *(t for t in [*event_times, *span_ends] if start <= t <= end)})
    total = 0.0
    for a, b in zip(times, times[1:], strict=False):
        gap = b - a
        if gap > IDLE_GAP_CAP_S and not any(s.start <= a and s.end >= b for s in spans):
            gap = IDLE_GAP_CAP_S
        total += gap
    return total


def compute_metrics(transcript: Transcript, start: float, end: float, gpu: GpuUsage) -> Metrics:
    notes = list(transcript.notes) + list(gpu.notes)
    contexts = [c.input_tokens + c.cached_tokens for c in transcript.calls]
    if not contexts:
        notes.append("no model calls in the transcript: per-turn context is 0")
    return Metrics(
        session_duration_s=session_duration_s(start, end, transcript.event_times, transcript.tool_spans),
        active_gpu_s=gpu.active_s,
        agent_turns=len(transcript.calls),
        context_tokens_median=float(statistics.median(contexts)) if contexts else 0.0,
        output_tokens=transcript.output_tokens_total,
        gpu=gpu,
        notes=notes,
    )


# The report's columns: (record key under "metrics", header, format).
METRIC_COLUMNS = (
    ("session_duration_s", "session min", lambda v: f"{v / 60:.1f}"),
    ("active_gpu_s", "GPU min", lambda v: f"{v / 60:.1f}"),
    ("agent_turns", "turns", lambda v: f"{v:g}"),
    ("context_tokens_median", "context tok", lambda v: f"{v / 1000:.1f}K"),
    ("output_tokens", "output tok", lambda v: f"{v / 1000:.1f}K"),
)
