"""A scripted model endpoint: the real agent CLIs run offline against a trajectory file, not a model.

A local HTTP server on 127.0.0.1 that speaks each provider's wire format the way its agent uses it:

- the Anthropic Messages API with SSE streaming (`POST /v1/messages`: Claude Code);
- the OpenAI Responses API, streamed (`POST /v1/responses`: Codex CLI);
- OpenAI-compatible chat completions (`POST /v1/chat/completions`: mini-swe-agent through litellm).

It replays a trajectory (JSON):

    {"turns": [
       {"shell": "sed -n 1,40p pithtrain/modules/distributed.py", "usage": {"input": 900, "cached": 300, "output": 40}},
       {"read": "pithtrain/config.py", "usage": {...}},
       {"final": "the answer", "usage": {...}},
     ]}

Each turn is one action: `shell` (a command), `read` (a file, relative to the workspace) or `final` (the
agent's last message). Past the end the last turn is served again: a final message said again, or
a `sleep` for ever (a run that never ends). The endpoint writes each turn in the asking agent's own tool
vocabulary (Claude Code's `Bash`/`Read`, Codex's `exec_command`, mini-swe-agent's `bash`) and reports the
turn's usage: `input` uncached prompt tokens, `cached` prompt tokens read from cache, `output` generated.

A request is an agent turn when it offers the agent's shell tool; its position is the number of assistant
turns already in its conversation, so a retried request gets the same turn again. Everything else (titles,
summaries, token counts, quota probes, model lists) gets a minimal reply and is logged as `aux`. Every
request is logged whole, one JSON line each, to the log file: what the agent sent is what tests inspect.
"""

import argparse
import itertools
import json
import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DEFAULT_USAGE = {"input": 100, "cached": 0, "output": 10}
# Claude Code's tools for the two actions; Codex's shell tools by the names its versions offer.
CLAUDE_SHELL, CLAUDE_READ = "Bash", "Read"
CLAUDE_BASH_TIMEOUT_MS = 600000  # the Bash tool's most; its default (2 min) is shorter than a smoke training run
# mini-swe-agent ends a run when a command's output starts with this line; the rest is its final message.
MINI_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
CODEX_SHELL_TOOLS = ("exec_command", "shell_command", "shell")
# Codex's exec_command returns after at most 30 s, naming the session of a command still running.
CODEX_YIELD_MS = 30000
CODEX_RUNNING = re.compile(r"Process running with session ID (?P<id>\d+)")


class TrajectoryError(ValueError):
    pass


@dataclass
class Turn:
    action: str
    """`shell`, `read` or `final`."""
    text: str
    """The command, the path or the final message."""
    usage: dict[str, int]


def load_trajectory(path: Path) -> list[Turn]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise TrajectoryError(f"{path}: cannot read the trajectory: {e}") from e
    return parse_trajectory(data, str(path))


def parse_trajectory(data: object, path: str) -> list[Turn]:
    """Strict: every error names the file, the turn, the field and what is allowed."""
    if not isinstance(data, dict) or not isinstance(data.get("turns"), list) or not data["turns"]:
        raise TrajectoryError(f"{path}: needs a non-empty list 'turns'")
    turns = []
    for i, t in enumerate(data["turns"]):
        actions = [k for k in ("shell", "read", "final") if k in t]
        unknown = set(t) - {"shell", "read", "final", "usage"}
        if len(actions) != 1 or unknown or not isinstance(t[actions[0]], str):
            raise TrajectoryError(
                f"{path}: turn {i}: needs exactly one of shell/read/final (a string), plus an optional usage; "
                f"got keys {sorted(t)}"
            )
        usage = {**DEFAULT_USAGE, **t.get("usage", {})}
        if set(usage) != set(DEFAULT_USAGE) or not all(isinstance(v, int) and v >= 0 for v in usage.values()):
            raise TrajectoryError(f"{path}: turn {i}: usage {t.get('usage')} must hold input/cached/output >= 0")
        turns.append(Turn(actions[0], t[actions[0]], usage))
    return turns


@dataclass
class ScriptedModel:
    """The trajectory, the workspace its `read` paths are under, and the request log."""

    turns: list[Turn]
    workspace: Path
    log_path: Path
    served: list[int] = field(default_factory=list)
    """The turn index served for each agent-turn request, in order."""
    aux: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count = field(default_factory=itertools.count)

    def turn_at(self, index: int) -> Turn:
        """Past the end, the last turn again: a `repeat` turn goes on for ever, a final message is said again."""
        return self.turns[min(index, len(self.turns) - 1)]

    def summary(self) -> dict:
        """What the endpoint served: agent turns, auxiliary requests, and the usage it reported for the turns."""
        usage = [self.turn_at(i).usage for i in self.served]
        contexts = sorted(u["input"] + u["cached"] for u in usage)
        return {
            "turns_served": len(self.served),
            "aux_requests": self.aux,
            "output_tokens": sum(u["output"] for u in usage),
            "context_tokens_median": float(statistics.median(contexts)) if contexts else 0.0,
        }

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_scripted_{next(self._ids):04d}"

    def log(self, entry: dict) -> None:
        with self._lock:
            if entry["kind"] == "turn":
                self.served.append(entry["turn"])
            else:
                self.aux += 1
            with open(self.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")


# ---- Anthropic Messages API (Claude Code) ----


def anthropic_reply(model: ScriptedModel, body: dict) -> tuple[str, int | None, list[tuple[str, dict]]]:
    """(kind, turn index, SSE events) for one /v1/messages request."""
    tools = [t.get("name") for t in body.get("tools", [])]
    if CLAUDE_SHELL not in tools:
        return "aux", None, _anthropic_events(model, body, [{"type": "text", "text": "ok"}], DEFAULT_USAGE, "end_turn")
    index = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    turn = model.turn_at(index)
    if turn.action == "final":
        blocks, stop = [{"type": "text", "text": turn.text}], "end_turn"
    elif turn.action == "shell":
        args = {"command": turn.text, "timeout": CLAUDE_BASH_TIMEOUT_MS}
        blocks, stop = [_tool_use(model, CLAUDE_SHELL, args)], "tool_use"
    else:
        path = str(model.workspace / turn.text)
        name = CLAUDE_READ if CLAUDE_READ in tools else CLAUDE_SHELL
        args = {"file_path": path} if name == CLAUDE_READ else {"command": f"cat {path}"}
        blocks, stop = [_tool_use(model, name, args)], "tool_use"
    return "turn", index, _anthropic_events(model, body, blocks, turn.usage, stop)


def _tool_use(model: ScriptedModel, name: str, args: dict) -> dict:
    return {"type": "tool_use", "id": model.new_id("toolu"), "name": name, "input": args}


def _anthropic_events(
    model: ScriptedModel, body: dict, blocks: list[dict], usage: dict[str, int], stop: str
) -> list[tuple[str, dict]]:
    start_usage = {
        "input_tokens": usage["input"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage["cached"],
        "output_tokens": 1,
    }
    message = {"id": model.new_id("msg"), "type": "message", "role": "assistant", "model": body.get("model", "")}
    message |= {"content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    events = [("message_start", {"type": "message_start", "message": message})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": b["text"]}
        else:
            start = {**b, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    final_usage = {**start_usage, "output_tokens": usage["output"]}
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": final_usage}
    events += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
    return events


# ---- OpenAI Responses API (Codex) ----


def responses_reply(model: ScriptedModel, body: dict) -> tuple[str, int | None, list[tuple[str, dict]]]:
    tools = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
    shell = next((n for n in CODEX_SHELL_TOOLS if n in tools), None)
    if shell is None:
        item = _responses_message(model, "ok")
        return "aux", None, _responses_events(model, body, [item], DEFAULT_USAGE)
    items = [it for it in body.get("input", []) if isinstance(it, dict)]
    index = sum(1 for it in items if _is_codex_turn_item(it))
    running = CODEX_RUNNING.search(str(items[-1].get("output", ""))) if items else None
    if running and items[-1].get("type") == "function_call_output":
        # The command outlived exec_command's wait (30 s at most): poll it as a model would, same turn's usage.
        turn = model.turn_at(index - 1)
        args = {"session_id": int(running["id"]), "chars": "", "yield_time_ms": CODEX_YIELD_MS}
        item = _responses_call(model, "write_stdin", args)
        return "turn", index - 1, _responses_events(model, body, [item], turn.usage)
    turn = model.turn_at(index)
    if turn.action == "final":
        item = _responses_message(model, turn.text)
    else:
        command = turn.text if turn.action == "shell" else f"cat {turn.text}"
        if shell == "shell":
            args = {"command": ["bash", "-lc", command], "workdir": str(model.workspace)}
        elif shell == "exec_command":
            args = {"cmd": command, "workdir": str(model.workspace), "yield_time_ms": CODEX_YIELD_MS}
        else:
            args = {"command": command, "workdir": str(model.workspace)}
        item = _responses_call(model, shell, args)
    return "turn", index, _responses_events(model, body, [item], turn.usage)


def _responses_call(model: ScriptedModel, name: str, args: dict) -> dict:
    item = {"type": "function_call", "id": model.new_id("fc"), "call_id": model.new_id("call"), "name": name}
    return item | {"arguments": json.dumps(args)}


def _is_codex_turn_item(item: dict) -> bool:
    """An earlier trajectory turn in the conversation: a tool call (not a poll of one) or a final message."""
    if item.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
        return item.get("name") != "write_stdin"
    return item.get("type") == "message" and item.get("role") == "assistant"


def _responses_message(model: ScriptedModel, text: str) -> dict:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    item = {"type": "message", "id": model.new_id("msg"), "role": "assistant", "status": "completed"}
    return item | {"content": content}


def _responses_events(
    model: ScriptedModel, body: dict, items: list[dict], usage: dict[str, int]
) -> list[tuple[str, dict]]:
    rid = model.new_id("resp")
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": body.get("model", "")}
    events = [("response.created", {"type": "response.created", "response": {**base, "status": "in_progress"}})]
    for i, item in enumerate(items):
        for name in ("response.output_item.added", "response.output_item.done"):
            events.append((name, {"type": name, "output_index": i, "item": item}))
    openai_usage = {
        "input_tokens": usage["input"] + usage["cached"],  # OpenAI's input count includes the cached part
        "input_tokens_details": {"cached_tokens": usage["cached"]},
        "output_tokens": usage["output"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["input"] + usage["cached"] + usage["output"],
    }
    done = {**base, "status": "completed", "output": items, "usage": openai_usage}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events


# ---- OpenAI chat completions (mini-swe-agent through litellm) ----


def chat_reply(model: ScriptedModel, body: dict) -> tuple[str, int | None, dict]:
    """(kind, turn index, chat.completion object). mini-swe-agent's turns offer its one `bash` tool; a final
    message is a command whose output starts with its submit line, then the text."""
    messages = body.get("messages", [])
    tools = [t.get("function", {}).get("name") for t in body.get("tools", [])]
    if not tools:
        return "aux", None, _chat_completion(model, body, "ok", None, DEFAULT_USAGE)
    index = sum(1 for m in messages if m.get("role") == "assistant")
    turn = model.turn_at(index)
    if turn.action == "final":
        command = f"echo {MINI_SUBMIT}\ncat <<'SCRIPTED_FINAL'\n{turn.text}\nSCRIPTED_FINAL"
    elif turn.action == "shell":
        command = turn.text
    else:
        command = f"cat {turn.text}"
    call = {"id": model.new_id("call"), "type": "function", "function": {"name": tools[0]}}
    call["function"]["arguments"] = json.dumps({"command": command})
    return "turn", index, _chat_completion(model, body, "", [call], turn.usage)


def _chat_completion(model: ScriptedModel, body: dict, text: str, calls: list | None, usage: dict) -> dict:
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    return {
        "id": model.new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [choice],
        "usage": {
            "prompt_tokens": usage["input"] + usage["cached"],
            "prompt_tokens_details": {"cached_tokens": usage["cached"]},
            "completion_tokens": usage["output"],
            "total_tokens": usage["input"] + usage["cached"] + usage["output"],
        },
    }


# ---- the server ----


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # every request goes to the JSON log instead
        pass

    def do_GET(self) -> None:
        self._log("aux", None, None)
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            self._json({"object": "list", "data": [], "models": []})
        else:
            self._json({})

    def do_HEAD(self) -> None:
        self._log("aux", None, None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"unparsed": raw.decode(errors="replace")}
        model = self.server.model
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self._log("aux", None, body)
            self._json({"input_tokens": DEFAULT_USAGE["input"]})
        elif path.endswith("/messages"):
            kind, index, events = anthropic_reply(model, body)
            self._log(kind, index, body)
            self._sse(events, named=True) if body.get("stream") else self._json(_anthropic_message(events))
        elif path.endswith("/responses"):
            kind, index, events = responses_reply(model, body)
            self._log(kind, index, body)
            self._sse(events, named=True)
        elif path.endswith("/chat/completions"):
            kind, index, completion = chat_reply(model, body)
            self._log(kind, index, body)
            self._json(completion)
        else:
            self._log("aux", None, body)
            self._json({})

    def _log(self, kind: str, index: int | None, body: dict | None) -> None:
        entry = {"t": time.time(), "kind": kind, "turn": index, "method": self.command, "path": self.path}
        self.server.model.log({**entry, "body": body})

    def _json(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str, dict]], named: bool) -> None:
        data = "".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n" for name, ev in events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _anthropic_message(events: list[tuple[str, dict]]) -> dict:
    """The non-streamed form of the same reply (Claude Code asks for some auxiliary calls without streaming)."""
    message = dict(events[0][1]["message"])
    message["content"] = []
    for name, ev in events:
        if name == "content_block_start":
            message["content"].append(dict(ev["content_block"]))
        elif name == "content_block_delta" and ev["delta"]["type"] == "text_delta":
            message["content"][-1]["text"] += ev["delta"]["text"]
        elif name == "content_block_delta":
            message["content"][-1]["input"] = json.loads(ev["delta"]["partial_json"])
        elif name == "message_delta":
            message["stop_reason"] = ev["delta"]["stop_reason"]
            message["usage"] = ev["usage"]
    return message


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ScriptedModel


class ScriptedEndpoint:
    """Bound to a free port of 127.0.0.1 when made (`base_url`); `with endpoint:` serves `model.turns` in a
    thread; `close()` frees the port of one never served."""

    def __init__(self, turns: list[Turn], workspace: Path, log_path: Path) -> None:
        self.model = ScriptedModel(turns, workspace, log_path)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.model = self.model
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def close(self) -> None:
        self._server.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "ScriptedEndpoint":
        self.model.log_path.write_text("")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    p = argparse.ArgumentParser(description="serve a trajectory as a model endpoint until interrupted")
    p.add_argument("trajectory", type=Path)
    p.add_argument("--workspace", type=Path, default=Path.cwd())
    p.add_argument("--log", type=Path, default=Path("requests.jsonl"))
    args = p.parse_args()
    try:
        endpoint = ScriptedEndpoint(load_trajectory(args.trajectory), args.workspace.resolve(), args.log)
    except TrajectoryError as e:
        raise SystemExit(f"error: {e}") from None
    with endpoint:
        print(endpoint.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
