"""Agent adapters: how to launch each agent, and how to read its own transcript into a `Transcript`.

Agents: `claude-code`, `codex`, `mini-swe-agent` (real coding agents), `gold` (runs the task's gold
solution: validates checkers and smoke-tests the pipeline) and `noop` (does nothing: every checker must
FAIL it). gold and noop are harness validation; their records say so and `report` keeps them apart.

The runner writes the agent's stdout to `stream.jsonl`, one `{"t": <unix time>, "line": <raw>}` per
line, stamped on arrival (Claude Code's stream-json carries no timestamps). Transcript sources:
- claude-code: stream.jsonl (`claude -p --output-format stream-json --verbose`). One model call per
  distinct `message.id`: one response is split over several `assistant` lines with the same usage.
  Output total from the final `result` event.
- codex: stream.jsonl (`codex exec --json`: `turn.completed` usage gives the output total) and the
  session rollout (`$CODEX_HOME/sessions/.../rollout-*.jsonl`): one model call per `token_count` event
  whose cumulative total advanced (Codex repeats the last count on some events).
- mini-swe-agent: its trajectory JSON (format `mini-swe-agent-1.1`, v2): one call per assistant message,
  usage from `extra.response.usage`, times from `extra.timestamp`.
"""

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ate_bench.metrics import ModelCall, ToolSpan, Transcript
from ate_bench.tasks import TaskSpec
from ate_bench.workspace import REPO_ROOT

AGENTS = ("claude-code", "codex", "mini-swe-agent", "gold", "noop")
HARNESS_AGENTS = ("gold", "noop")

# mini-swe-agent kills a command after 30 s by default; a training or verification run takes minutes.
MINI_COMMAND_TIMEOUT_S = 3600
# litellm provider prefix of a mini-swe-agent model name -> the API key variable it reads.
MINI_KEY_BY_PROVIDER = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
CLAUDE_EDIT_TOOLS = "Edit,MultiEdit,Write,NotebookEdit"
# Where `make agents` installs the pinned CLIs (Makefile: the versions); used where PATH has none.
AGENTS_DIR = REPO_ROOT / ".agents"
# A scripted endpoint's model name and key: placeholders, never a credential.
SCRIPTED_MODEL = "scripted"
SCRIPTED_KEY = "scripted-endpoint-no-credential"

STREAM_FILE = "stream.jsonl"
ROLLOUT_FILE = "rollout.jsonl"
TRAJECTORY_FILE = "trajectory.json"
FINAL_MESSAGE_FILE = "final_message.md"
CLAUDE_SESSION_FILE = "claude_session.jsonl"


class CannotStart(RuntimeError):
    """The agent cannot be run here (CLI missing, no credentials, no model); nothing is recorded."""


@dataclass
class AgentLaunch:
    argv: list[str]
    env: dict[str, str]
    """Variables added to the minimal environment, secrets included (their names go in the record)."""
    secret_names: list[str]
    cli_version: str = ""
    """The pinned CLI's version as installed under .agents/ ("" for a CLI found on PATH, or gold/noop)."""
    readable: list[Path] = field(default_factory=list)
    """What the CLI needs to read inside the sandbox, which hides this checkout: its install under .agents/."""


def make_launch(
    agent: str,
    task: TaskSpec,
    framework: str,
    prompt: str,
    workspace: Path,
    run_dir: Path,
    model: str,
    environ: dict[str, str],
    profile: str = "",
    endpoint: str = "",
    in_sandbox: bool = True,
) -> AgentLaunch:
    """The command line for `agent`; raises CannotStart (naming every missing piece) where it could not start.

    `endpoint`: the base URL of a scripted model endpoint (scripted_endpoint.py). The agent is pointed at it
    with a placeholder key, and the caller's credentials are not passed at all. `in_sandbox`: the agent runs
    in the harness's sandbox (sandbox.py), where Codex cannot build its own.
    """
    read_only = task.tools == "read-only"
    missing: list[str] = []  # a missing CLI and missing credentials are both said at once
    cli, cli_version = installed_cli(agent, environ.get("PATH"))
    if agent == "claude-code":
        model = model or (SCRIPTED_MODEL if endpoint else "")
        argv = [cli, "-p", prompt, "--output-format", "stream-json", "--verbose"]
        argv += ["--permission-mode", "bypassPermissions"]
        argv += ["--disallowedTools", CLAUDE_EDIT_TOOLS] if read_only else []
        argv += ["--model", model] if model else []
        keys = _keys(environ, ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"), missing, endpoint)
        extra = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        # As root, Claude Code refuses bypassPermissions ("cannot be used with root/sudo privileges") unless
        # IS_SANDBOX=1 says the machine is a sandbox (observed with 2.1.328).
        extra |= {"IS_SANDBOX": "1"} if os.geteuid() == 0 else {}
        extra |= {"ANTHROPIC_BASE_URL": endpoint} if endpoint else {}
    elif agent == "codex":
        argv = [cli, "exec", "--json", "-C", str(workspace), "--skip-git-repo-check"]
        argv += ["--output-last-message", str(run_dir / FINAL_MESSAGE_FILE)]
        # Codex's own read-only sandbox (bubblewrap) cannot be built inside the harness's: every command then
        # failed with "error building bubblewrap command: Read-only file system" (0.171.0). There, as for
        # mini-swe-agent, an edit of a read-only workspace is a FAIL the harness gives.
        own_sandbox = read_only and not in_sandbox
        argv += ["--sandbox", "read-only"] if own_sandbox else ["--dangerously-bypass-approvals-and-sandbox"]
        # Its commands run in a login shell by default, and /etc/profile resets PATH: the harness's PATH (the
        # environment with torch) was lost and `python` not found (observed with 0.171.0 on operate-02).
        argv += ["-c", "allow_login_shell=false"]
        if endpoint:
            # Codex reads no base-URL variable (OPENAI_BASE_URL is ignored by 0.171.0): a provider entry does it.
            model = model or SCRIPTED_MODEL
            provider = f'{{name="scripted", base_url="{endpoint}/v1", env_key="CODEX_API_KEY", wire_api="responses"}}'
            argv += ["-c", "model_provider=scripted", "-c", f"model_providers.scripted={provider}"]
        argv += ["-m", model] if model else []
        argv += [prompt]
        keys = _keys(environ, ("CODEX_API_KEY", "OPENAI_API_KEY"), missing, endpoint)
        extra = {}
    elif agent == "mini-swe-agent":
        model = model or (f"openai/{SCRIPTED_MODEL}" if endpoint else "")
        if not model:
            raise CannotStart("mini-swe-agent needs --model, e.g. anthropic/claude-sonnet-4-5")
        provider = model.split("/", 1)[0]
        if provider not in MINI_KEY_BY_PROVIDER:
            known = ", ".join(MINI_KEY_BY_PROVIDER)
            raise CannotStart(f"mini-swe-agent model {model!r}: provider {provider!r} is not one of {known}")
        argv = [cli, "-y", "--exit-immediately", "-m", model, "-t", prompt]
        argv += ["-o", str(run_dir / TRAJECTORY_FILE), "-c", "mini.yaml"]
        argv += ["-c", f"environment.timeout={MINI_COMMAND_TIMEOUT_S}", "-c", f"environment.cwd={workspace}"]
        keys = _keys(environ, (MINI_KEY_BY_PROVIDER[provider],), missing, endpoint)
        # litellm fetches its model price list from the network at import unless told to use its own copy.
        extra = {
            "MSWEA_CONFIGURED": "true",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        extra |= {"OPENAI_BASE_URL": f"{endpoint}/v1"} if endpoint else {}
    elif agent == "gold":
        if not task.gold_script(framework).is_file():
            raise CannotStart(f"task {task.id} has no gold for {framework}: {task.gold_unrunnable(framework)}")
        return script_launch(task.gold_script(framework), profile)
    elif agent == "noop":
        argv, keys, extra = ["true"], {}, {}
    else:
        raise ValueError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    if shutil.which(argv[0], path=environ.get("PATH")) is None:
        missing.insert(0, f"command {argv[0]!r} is not on PATH and `make agents` has not installed it")
    if missing:
        raise CannotStart(f"{agent}: " + "; and ".join(missing))
    secrets = [] if endpoint else sorted(keys)
    readable = [AGENTS_DIR / ("mini" if agent == "mini-swe-agent" else "npm")] if cli_version else []
    return AgentLaunch(argv, {**extra, **keys}, secrets, cli_version, readable)


def installed_cli(agent: str, path_env: str | None) -> tuple[str, str]:
    """(command, version) of the agent's CLI: one on PATH comes first (its version then comes from the
    transcript alone: "" here); else the pinned copy `make agents` installed under .agents/."""
    npm = AGENTS_DIR / "npm" / "node_modules"
    if agent == "claude-code":
        name, cli, package = "claude", npm / ".bin" / "claude", npm / "@anthropic-ai" / "claude-code" / "package.json"
    elif agent == "codex":
        name, cli, package = "codex", npm / ".bin" / "codex", npm / "@openai" / "codex" / "package.json"
    elif agent == "mini-swe-agent":
        name, cli = "mini", AGENTS_DIR / "mini" / "bin" / "mini"
        found = sorted(AGENTS_DIR.glob("mini/lib/python*/site-packages/mini_swe_agent-*.dist-info"))
        package = found[0] if found else AGENTS_DIR / "mini" / "no-mini_swe_agent.dist-info"
    else:
        return "", ""
    if shutil.which(name, path=path_env) or not (cli.is_file() and package.exists()):
        return name, ""
    if package.suffix == ".dist-info":
        return str(cli), package.name.removeprefix("mini_swe_agent-").removesuffix(".dist-info")
    return str(cli), json.loads(package.read_text())["version"]


def script_launch(script: Path, profile: str) -> AgentLaunch:
    """A gold or wrong solution script: `bash SCRIPT`, GOLD_DIR its own directory, ATE_PROFILE the profile."""
    env = {"GOLD_DIR": str(script.parent), **({"ATE_PROFILE": profile} if profile else {})}
    return AgentLaunch(argv=["bash", str(script)], env=env, secret_names=[])


def _keys(environ: dict[str, str], names: tuple[str, ...], missing: list[str], endpoint: str) -> dict[str, str]:
    """The agent's own credential variables that are set; at least one must be (else noted in `missing`).
    With a scripted endpoint, the first name holds a placeholder and nothing of the caller's is passed."""
    if endpoint:
        return {names[0]: SCRIPTED_KEY}
    found = {n: environ[n] for n in names if environ.get(n)}
    if not found:
        missing.append(f"no credentials: set one of {', '.join(names)}")
    return found


def collect_transcript(agent: str, home: Path, run_dir: Path) -> None:
    """Copy transcripts the agent wrote outside the run directory into it (Codex's session rollout, Claude
    Code's session file)."""
    if agent == "codex":
        rollouts = sorted((home / ".codex" / "sessions").rglob("rollout-*.jsonl"))
        if rollouts:
            shutil.copy(rollouts[-1], run_dir / ROLLOUT_FILE)
    elif agent == "claude-code":
        sessions = sorted((home / ".claude" / "projects").glob("*/*.jsonl"), key=lambda p: p.stat().st_mtime)
        if sessions:
            shutil.copy(sessions[-1], run_dir / CLAUDE_SESSION_FILE)


def read_stream(path: Path) -> list[tuple[float, dict]]:
    """The stamped stdout as (time, event); lines that are not JSON objects become {"text": line}."""
    out = []
    for raw in path.read_text().splitlines():
        if not raw.strip():
            continue
        rec = json.loads(raw)
        try:
            event = json.loads(rec["line"])
        except json.JSONDecodeError:
            event = None
        out.append((rec["t"], event if isinstance(event, dict) else {"text": rec["line"]}))
    return out


def parse_transcript(agent: str, run_dir: Path) -> Transcript:
    stream = read_stream(run_dir / STREAM_FILE) if (run_dir / STREAM_FILE).is_file() else []
    if agent == "claude-code":
        session = run_dir / CLAUDE_SESSION_FILE
        lines = session.read_text().splitlines() if session.is_file() else []
        return parse_claude_stream(stream, claude_session_outputs([json.loads(x) for x in lines if x.strip()]))
    elif agent == "codex":
        rollout = run_dir / ROLLOUT_FILE
        if not rollout.is_file():
            raise FileNotFoundError(f"{rollout}: the Codex session rollout was not found; calls cannot be counted")
        return parse_codex(stream, [json.loads(x) for x in rollout.read_text().splitlines() if x.strip()])
    elif agent == "mini-swe-agent":
        return parse_mini_trajectory(json.loads((run_dir / TRAJECTORY_FILE).read_text()))
    elif agent in HARNESS_AGENTS:
        text = "\n".join(e.get("text", json.dumps(e)) for _, e in stream)
        notes = [f"{agent} is harness validation, not an agent: no model calls"]
        return Transcript([], [], [t for t, _ in stream], 0, final_message=text, notes=notes, agent_version="ate-bench")
    else:
        raise ValueError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")


def _close_open_tools(
    open_tools: dict[str, tuple[str, float]], spans: list[ToolSpan], times: list[float], notes: list[str]
) -> None:
    """Tools still running when the transcript ends (a killed run) end at its last event."""
    if open_tools:
        end = max(times)
        spans.extend(ToolSpan(name, t0, end) for name, t0 in open_tools.values())
        notes.append(f"{len(open_tools)} tool call(s) had no result; they end at the transcript's last event")


def claude_session_outputs(session: list[dict]) -> dict[str, int]:
    """message id -> output tokens, from Claude Code's session file (~/.claude/projects/<cwd>/<id>.jsonl).

    Its stream-json repeats each message's usage as the response began (output_tokens 1, say); the session
    file has the final count. Only a run killed before its `result` event needs them.
    """
    out = {}
    for line in session:
        msg = line.get("message") if line.get("type") == "assistant" else None
        if isinstance(msg, dict) and "id" in msg:
            out[msg["id"]] = max(out.get(msg["id"], 0), msg.get("usage", {}).get("output_tokens", 0))
    return out


def parse_claude_stream(stream: list[tuple[float, dict]], session_outputs: dict[str, int] | None = None) -> Transcript:
    outputs = session_outputs or {}
    calls: dict[str, ModelCall] = {}
    open_tools: dict[str, tuple[str, float]] = {}
    spans: list[ToolSpan] = []
    model, version, final, output_total, notes = "", "", "", None, []
    for t, ev in stream:
        kind = ev.get("type")
        if kind == "system" and ev.get("subtype") == "init":
            model, version = ev.get("model", ""), ev.get("claude_code_version", "")
        elif kind == "assistant":
            msg = ev["message"]
            usage = msg.get("usage", {})
            call = calls.get(msg["id"])
            if call is None:
                # Cache writes are prompt tokens read uncached: they go with input_tokens.
                call = calls[msg["id"]] = ModelCall(
                    t=t,
                    input_tokens=usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0),
                    cached_tokens=usage.get("cache_read_input_tokens", 0),
                    output_tokens=usage.get("output_tokens", 0),
                )
            call.output_tokens = max(call.output_tokens, usage.get("output_tokens", 0), outputs.get(msg["id"], 0))
            for block in msg.get("content", []):
                if block.get("type") == "tool_use":
                    call.tool_calls.append(block["name"])
                    open_tools[block["id"]] = (block["name"], t)
        elif kind == "user":
            content = ev.get("message", {}).get("content", [])
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id") in open_tools:
                    name, t0 = open_tools.pop(block["tool_use_id"])
                    spans.append(ToolSpan(name, t0, t))
        elif kind == "result":
            output_total = ev.get("usage", {}).get("output_tokens", 0)
            final = ev.get("result", "")
    times = [t for t, _ in stream]
    _close_open_tools(open_tools, spans, times, notes)
    if output_total is None:
        output_total = sum(c.output_tokens for c in calls.values())
        where = "the session file's final counts" if outputs else "stream-json, which has each response's first count"
        notes.append(f"no result event (run killed?): output tokens summed over calls ({where})")
    return Transcript(list(calls.values()), spans, times, output_total, model, final, notes, version)


def _iso(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


def parse_codex(stream: list[tuple[float, dict]], rollout: list[dict]) -> Transcript:
    calls: list[ModelCall] = []
    open_tools: dict[str, tuple[str, float]] = {}
    spans: list[ToolSpan] = []
    pending: list[str] = []
    prev_total, model, version, notes = None, "", "", []
    times = [t for t, _ in stream]
    for line in rollout:
        t, kind, p = _iso(line["timestamp"]), line.get("type"), line.get("payload", {})
        times.append(t)
        if kind == "session_meta":
            version = p.get("cli_version", "")
        elif kind == "turn_context":
            model = p.get("model", model)
        elif kind == "response_item" and p.get("type") in (
            "function_call",
            "custom_tool_call",
            "local_shell_call",
        ):
            name = p.get("name", p["type"])
            pending.append(name)
            open_tools[p.get("call_id", "")] = (name, t)
        elif kind == "response_item" and p.get("type") in ("function_call_output", "custom_tool_call_output"):
            if p.get("call_id") in open_tools:
                name, t0 = open_tools.pop(p["call_id"])
                spans.append(ToolSpan(name, t0, t))
        elif kind == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            total = p["info"]["total_token_usage"]
            if total == prev_total:
                continue  # the same count reported again, not a new model call
            prev_total, last = total, p["info"]["last_token_usage"]
            # OpenAI's input_tokens include the cached ones.
            cached = last.get("cached_input_tokens", 0)
            calls.append(ModelCall(t, last["input_tokens"] - cached, cached, last["output_tokens"], pending))
            pending = []
    turns = [ev for _, ev in stream if ev.get("type") == "turn.completed"]
    output_total = sum(ev["usage"]["output_tokens"] for ev in turns)
    if not turns:
        output_total = sum(c.output_tokens for c in calls)
        notes.append("no turn.completed event (run killed?): output tokens summed over calls")
    elif output_total != sum(c.output_tokens for c in calls):
        notes.append(f"turn.completed output {output_total} != rollout sum {sum(c.output_tokens for c in calls)}")
    finals = [
        ev["item"].get("text", "")
        for _, ev in stream
        if ev.get("type") == "item.completed" and ev.get("item", {}).get("type") == "agent_message"
    ]
    _close_open_tools(open_tools, spans, times, notes)
    return Transcript(calls, spans, times, output_total, model, finals[-1] if finals else "", notes, version)


def parse_mini_trajectory(traj: dict) -> Transcript:
    fmt = traj.get("trajectory_format")
    if fmt != "mini-swe-agent-1.1":
        raise ValueError(f"mini-swe-agent trajectory format {fmt!r}: only 'mini-swe-agent-1.1' (v2) has timestamps")
    info = traj.get("info", {})
    calls: list[ModelCall] = []
    spans: list[ToolSpan] = []
    open_tools: list[tuple[str, float]] = []
    times: list[float] = []
    for msg in traj["messages"]:
        extra = msg.get("extra", {})
        if "timestamp" not in extra:
            continue
        t = extra["timestamp"]
        times.append(t)
        if msg["role"] == "assistant":
            usage = extra["response"]["usage"]
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            if msg.get("tool_calls"):
                names = [tc["function"]["name"] for tc in msg["tool_calls"]]
            else:
                names = ["bash"] * len(extra.get("actions", []))
            calls.append(ModelCall(t, usage["prompt_tokens"] - cached, cached, usage["completion_tokens"], names))
            open_tools = [(n, t) for n in names]
        elif msg["role"] in ("user", "tool") and "returncode" in extra and open_tools:
            name, t0 = open_tools.pop(0)
            spans.append(ToolSpan(name, t0, t))
    notes: list[str] = []
    _close_open_tools(dict(enumerate(open_tools)), spans, times, notes)
    model = info.get("config", {}).get("model", {}).get("model_name", "")
    total = sum(c.output_tokens for c in calls)
    return Transcript(
        calls, spans, times, total, model, info.get("submission") or "", notes, info.get("mini_version", "")
    )
