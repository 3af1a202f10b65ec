"""The scripted endpoint on its own (no agent CLI): each wire format, turn positions, auxiliary requests, errors."""

import json
import urllib.request
from pathlib import Path

import pytest

from ate_bench.__main__ import main
from ate_bench.scripted_endpoint import ScriptedEndpoint, TrajectoryError, load_trajectory, parse_trajectory

TURNS = {
    "turns": [
        {"shell": "ls", "usage": {"input": 10, "cached": 5, "output": 3}},
        {"read": "a.py", "usage": {"input": 20, "cached": 6, "output": 4}},
        {"final": "done", "usage": {"input": 30, "cached": 7, "output": 5}},
    ]
}


@pytest.fixture
def endpoint(tmp_path):
    ep = ScriptedEndpoint(parse_trajectory(TURNS, "test"), tmp_path / "ws", tmp_path / "requests.jsonl")
    with ep:
        yield ep


def _post(ep: ScriptedEndpoint, path: str, body: dict) -> str:
    req = urllib.request.Request(ep.base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode()


def _sse(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_anthropic_messages_turns_by_position_and_aux_requests(endpoint):
    tools = [{"name": "Bash"}, {"name": "Read"}]
    first = _sse(_post(endpoint, "/v1/messages?beta=true", {"stream": True, "tools": tools, "messages": []}))
    assert (
        first[1]["content_block"]["name"] == "Bash" and json.loads(first[2]["delta"]["partial_json"])["command"] == "ls"
    )
    assert first[0]["message"]["usage"]["cache_read_input_tokens"] == 5 and first[-2]["usage"]["output_tokens"] == 3
    # Two assistant turns in the conversation: the third turn, the final message; a retry gets it again.
    messages = [{"role": "user"}, {"role": "assistant"}, {"role": "user"}, {"role": "assistant"}, {"role": "user"}]
    for _ in range(2):
        last = _sse(_post(endpoint, "/v1/messages", {"stream": True, "tools": tools, "messages": messages}))
        assert last[2]["delta"]["text"] == "done"
    title = _sse(_post(endpoint, "/v1/messages", {"stream": True, "messages": [{"role": "user"}]}))
    assert title[2]["delta"]["text"] == "ok"
    count = json.loads(_post(endpoint, "/v1/messages/count_tokens", {"messages": []}))
    assert count == {"input_tokens": 100}
    assert endpoint.model.served == [0, 2, 2] and endpoint.model.summary()["aux_requests"] == 2
    kinds = [json.loads(x)["kind"] for x in endpoint.model.log_path.read_text().splitlines()]
    assert kinds == ["turn", "turn", "turn", "aux", "aux"]


def test_responses_api_reads_with_the_shell_and_polls_a_running_command(endpoint):
    tools = [{"type": "function", "name": "exec_command"}, {"type": "function", "name": "write_stdin"}]
    call = {"type": "function_call", "name": "exec_command", "call_id": "c1"}
    running = {"type": "function_call_output", "call_id": "c1", "output": "Process running with session ID 7"}
    events = _sse(_post(endpoint, "/v1/responses", {"tools": tools, "input": [call, running]}))
    item = events[-1]["response"]["output"][0]
    assert item["name"] == "write_stdin" and json.loads(item["arguments"])["session_id"] == 7
    done = {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 0"}
    events = _sse(_post(endpoint, "/v1/responses", {"tools": tools, "input": [call, done]}))
    args = json.loads(events[-1]["response"]["output"][0]["arguments"])
    assert args["cmd"] == "cat a.py"  # turn 1, a read, through the shell
    usage = events[-1]["response"]["usage"]
    assert usage["input_tokens"] == 26 and usage["input_tokens_details"]["cached_tokens"] == 6
    assert endpoint.model.served == [0, 1]  # the poll is turn 0 again, with its usage


def test_chat_completions_final_message_is_minis_submit_command(endpoint):
    body = {"tools": [{"type": "function", "function": {"name": "bash"}}], "messages": []}
    body["messages"] = [{"role": "system"}, {"role": "user"}] + [{"role": "assistant"}, {"role": "tool"}] * 2
    reply = json.loads(_post(endpoint, "/v1/chat/completions", body))
    command = json.loads(reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])["command"]
    assert command.startswith("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT") and "\ndone\n" in command
    assert reply["usage"] == {
        "prompt_tokens": 37,
        "prompt_tokens_details": {"cached_tokens": 7},
        "completion_tokens": 5,
        "total_tokens": 42,
    }


@pytest.mark.parametrize(
    "turns,says",
    [
        ({"turns": []}, "non-empty list 'turns'"),
        ({"turns": [{"shell": "ls", "final": "x"}]}, "turn 0: needs exactly one of shell/read/final"),
        ({"turns": [{"final": "x", "usage": {"input": -1}}]}, "turn 0: usage {'input': -1}"),
    ],
)
def test_a_bad_trajectory_names_the_turn_and_field(tmp_path, turns, says):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(turns))
    with pytest.raises(TrajectoryError, match=says.replace("{", r"\{").replace("(", r"\(")):
        load_trajectory(path)


def test_run_with_a_bad_trajectory_exits_2(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text('{"turns": [{"sleep": 1}]}')
    argv = ["run", "--task", "qa-01", "--framework", "pithtrain", "--agent", "claude-code", "--scripted", str(path)]
    argv += ["--results-dir", str(tmp_path / "r"), "--work-root", str(tmp_path / "w")]
    assert main(argv) == 2
    assert f"{path}: turn 0: needs exactly one of shell/read/final" in capsys.readouterr().err
    assert not Path(tmp_path / "w").exists() or not any(Path(tmp_path / "w").iterdir())
