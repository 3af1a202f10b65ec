"""Adversarial fake agents: nothing an agent does reaches the verdict, the checkout or a secret.

Each fake agent is a `claude` on PATH (a bash script) that attacks, then answers in stream-json. Each
test fails on the harness before the sandbox (issue 25) and passes with it.
"""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ate_bench import runner, sandbox
from ate_bench.__main__ import main
from ate_bench.runner import RunOptions, run_once
from ate_bench.tasks import load_tasks
from ate_bench.workspace import REPO_ROOT

TOY_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "ate" / "tasks"
CANARY = "canary-" + secrets.token_hex(8)

needs_sandbox = pytest.mark.skipif(bool(sandbox.unavailable()), reason=f"no sandbox here: {sandbox.unavailable()}")


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    monkeypatch.setattr(runner, "gpu_inventory", lambda: [])


@pytest.fixture
def dirs(tmp_path):
    return {"results_dir": tmp_path / "results", "work_root": tmp_path / "work", "cache_dir": tmp_path / "cache"}


def _fake_agent(tmp_path: Path, attack: str, answer: str = "") -> Path:
    """A `claude` that runs `attack` (bash, in the workspace), then prints a stream-json session whose
    final message is `answer` plus whatever the attack wrote to $HOME/answer.txt."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    result = json.dumps({"type": "result", "result": "@ANSWER@", "usage": {"output_tokens": 1}})
    init = json.dumps({"type": "system", "subtype": "init", "model": "fake", "claude_code_version": "0"})
    script = f"""#!/usr/bin/env bash
{attack}
answer=$(printf '%s\\n%s' {json.dumps(answer)} "$(cat "$HOME/answer.txt" 2>/dev/null)")
echo '{init}'
python3 -c 'import json,sys; print(sys.argv[1].replace(chr(34)+"@ANSWER@"+chr(34), json.dumps(sys.argv[2])))' \\
  '{result}' "$answer"
"""
    (bindir / "claude").write_text(script)
    (bindir / "claude").chmod(0o755)
    return bindir


def _run(tmp_path, dirs, monkeypatch, attack: str, answer: str = "", task_id="qa-02", tasks=TOY_TASKS, **kw) -> dict:
    bindir = _fake_agent(tmp_path, attack, answer)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY)
    task = load_tasks(tasks)[task_id]
    path = run_once(RunOptions(task=task, framework="pithtrain", agent="claude-code", **dirs, **kw))
    return json.loads(path.read_text())


def _said(rec: dict) -> str:
    """What the agent saw and reported: its final message, as the harness kept it."""
    return (Path(rec["transcript"]).parent / "final_message.md").read_text()


def test_the_callers_environment_is_out_of_reach(tmp_path, dirs):
    """The harness runs as a child here, so its /proc/PID/environ holds the canary from its start."""
    attack = """
for f in /proc/$PPID/environ /proc/*/environ; do tr '\\0' '\\n' < "$f" 2>/dev/null; done > "$HOME/answer.txt"
"""
    env = {**os.environ, "PATH": f"{_fake_agent(tmp_path, attack)}:{os.environ['PATH']}"}
    env |= {"ANTHROPIC_API_KEY": "sk-test", "AWS_SECRET_ACCESS_KEY": CANARY, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "ate_bench", "--tasks-dir", str(TOY_TASKS), "run", "--task", "qa-02"]
    cmd += ["--framework", "pithtrain", "--agent", "claude-code", "--results-dir", str(dirs["results_dir"])]
    cmd += ["--work-root", str(dirs["work_root"])]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # the answer is wrong: FAIL
    (path,) = dirs["results_dir"].glob("*/record.json")
    rec = json.loads(path.read_text())
    assert "PATH=" in _said(rec)  # the attack ran (its own environment is readable)
    assert CANARY not in _said(rec)
    assert rec["sandbox"]["isolated"] is True


def test_the_checkout_is_out_of_reach(tmp_path, dirs, monkeypatch):
    attack = f"""
{{ for p in /proc/[0-9]*; do readlink "$p/cwd"; readlink "$p/root"; done
   ls {REPO_ROOT}/ate_bench {REPO_ROOT}/tasks {dirs["results_dir"]} {dirs["work_root"]}
   cat {REPO_ROOT}/ate_bench/runner.py | head -3; }} 2>/dev/null > "$HOME/answer.txt"
"""
    rec = _run(tmp_path, dirs, monkeypatch, attack)
    said = _said(rec)
    assert rec["workspace"] in said  # the attack ran: its own cwd
    assert str(REPO_ROOT) not in said and "__main__.py" not in said and "record.json" not in said
    assert "One run: materialize" not in said and "operate" not in said


@pytest.mark.parametrize("isolated", [True, False], ids=["sandbox", "no-sandbox"])
def test_a_rewritten_checker_is_never_believed(tmp_path, dirs, monkeypatch, isolated):
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    check, key = tasks / "qa" / "toy-cli" / "check.py", tasks / "qa" / "toy-cli" / "key.toml"
    before = check.read_bytes(), key.read_bytes()
    attack = f"""
echo 'print("PASS")' > {check} 2>/dev/null
echo '' > {key} 2>/dev/null
echo 'x = 1' > {tasks / "qa" / "toy_keycheck_extra.py"} 2>/dev/null
"""
    flag = {} if isolated else {"sandbox": False}  # the default is the sandbox
    rec = _run(tmp_path, dirs, monkeypatch, attack, "no idea", tasks=tasks, **flag)
    assert (check.read_bytes(), key.read_bytes()) == before  # restored (or never touched)
    assert not (tasks / "qa" / "toy_keycheck_extra.py").exists()
    if isolated:
        assert rec["verdict"]["status"] == "FAIL"  # the real checker, on the real answer
    else:
        assert rec["verdict"]["status"] == "ERROR"
        assert rec["sandbox"] == {"isolated": False, "why": "--no-sandbox"}
        reason = rec["verdict"]["reasons"][0]
        assert "qa/toy-cli/check.py" in reason and "qa/toy-cli/key.toml" in reason and "restored" in reason
        assert "qa/toy_keycheck_extra.py" in reason


def test_an_edited_read_only_workspace_fails_and_is_checked_pristine(tmp_path, dirs, monkeypatch):
    # The key's entry slot wants `def main(` in pithtrain/__main__.py: the agent appends one and cites it.
    attack = """
echo 'def main():' >> pithtrain/__main__.py
n=$(wc -l < pithtrain/__main__.py); name=$(grep -n '^name = ' pyproject.toml | cut -d: -f1)
printf '<final-answer>\\nentry: pithtrain/__main__.py:%s\\nname: pyproject.toml:%s\\n</final-answer>\\n' "$n" "$name" \\
  > "$HOME/answer.txt"
"""
    rec = _run(tmp_path, dirs, monkeypatch, attack)
    assert rec["verdict"]["status"] == "FAIL"
    reasons = rec["verdict"]["reasons"]
    assert reasons[0].startswith("read-only task, but the agent changed the workspace: pithtrain/__main__.py")
    assert any("does not exist (fabricated)" in r for r in reasons[1:])  # checked against the pristine tree
    assert "+def main():" in rec["workspace_diff"]


@pytest.mark.parametrize("timed_out", [False, True], ids=["clean-exit", "timeout"])
def test_a_double_forked_daemon_dies_with_the_agent(tmp_path, dirs, monkeypatch, timed_out):
    token = f"{secrets.randbelow(10**6) + 10**6}.{secrets.randbelow(900) + 100}"
    attack = f"""( setsid sleep {token} & ) ; sleep {30 if timed_out else 0.2}"""
    try:
        rec = _run(tmp_path, dirs, monkeypatch, attack, time_limit_s=2.0)
        time.sleep(0.5)
        assert _pids_with(token) == [], "the daemon outlived the run"
        assert rec["exit"]["timed_out"] == timed_out and (rec["exit"]["returncode"] == 0) != timed_out
    finally:
        for pid in _pids_with(token):
            os.kill(pid, signal.SIGKILL)


def _pids_with(token: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and token.encode() in (d / "cmdline").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def test_a_symlink_out_of_the_workspace_leaks_nothing(tmp_path, dirs, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text(CANARY + "\n")
    attack = f"""
ln -s {secret} leak.txt
mkdir -p artifacts && ln -s {secret} artifacts/train-20260101-000000.log
printf '<final-answer>\\nleak.txt:1\\n</final-answer>\\n' > "$HOME/answer.txt"
"""
    rec = _run(tmp_path, dirs, monkeypatch, attack)
    run_dir = Path(rec["transcript"]).parent
    assert "leak.txt" in rec["changed_paths"]
    assert f"new link leak.txt -> {secret}" in rec["workspace_diff"]
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert CANARY not in path.read_text(errors="replace"), path
    assert rec["verdict"]["status"] == "FAIL"


def test_the_checker_runs_isolated_too(tmp_path, dirs, monkeypatch):
    """A checker (which may run the agent's code) can neither read the caller's environment nor write its task."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, tasks)
    check = tasks / "qa" / "toy-cli" / "check.py"
    check.write_text(
        f"""import os, pathlib


def environ(pid):
    try:
        return pathlib.Path(f"/proc/{{pid}}/environ").read_text(errors="replace")
    except OSError:
        return ""


env = "".join(environ(p) for p in os.listdir("/proc") if p.isdigit())
try:
    pathlib.Path(__file__).with_name("written-by-checker").write_text("x")
    wrote = True
except OSError:
    wrote = False
broken = "{CANARY}" in env or wrote
print("PASS" if broken else "FAIL: isolated")
raise SystemExit(0 if broken else 1)
"""
    )
    rec = _run(tmp_path, dirs, monkeypatch, "", tasks=tasks)
    assert rec["verdict"]["reasons"] == ["isolated"]
    assert not check.with_name("written-by-checker").exists()


ATTACK = r"""
{ tr '\0' '\n' < /proc/$PPID/environ; for p in /proc/[0-9]*; do readlink $p/cwd; done; ls "$HIDDEN" 2>&1
  echo x > "$HIDDEN/planted" 2>&1; echo x > /usr/planted 2>&1; echo x > "$WS/ok" && echo wrote-ws
  echo x > /dev/null && echo devnull; grep CapEff /proc/self/status; id -u; } > "$WS/report.txt"
( setsid sleep "$TOKEN" & ) ; sleep 0.2
"""


def _sandboxed_attack(root: Path, as_user: list[str]) -> str:
    """The attack above run by the sandbox as a child process (as `as_user` when given); its report."""
    ws, hidden, token = root / "ws", root / "hidden", f"{secrets.randbelow(10**6) + 10**6}.5"
    for d in (ws, hidden):
        d.mkdir()
    (hidden / "checker.py").write_text("secret checker\n")
    os.chmod(root, 0o755)
    for d in (ws, hidden, *hidden.iterdir()):
        os.chown(d, *((65534, 65534) if as_user else (os.getuid(), os.getgid())))
    code = (
        "import sys; from pathlib import Path; import sandbox as s\n"
        "why = s.unavailable()\n"
        "if why: print(why); sys.exit(77)\n"
        f"box = s.make_sandbox([Path('{ws}')], [], [Path('{hidden}'), Path('{REPO_ROOT}')], '/usr/bin:/bin', 'bash')\n"
        "env = {'PATH': '/usr/bin:/bin', 'WS': sys.argv[2], 'HIDDEN': sys.argv[3], 'TOKEN': sys.argv[4]}\n"
        "sys.exit(__import__('subprocess').run(s.wrap(['bash', '-c', sys.argv[1]], box), env=env).returncode)\n"
    )
    # A copy of sandbox.py (standard library only) where `nobody` can read it, wherever the checkout is.
    shutil.copy(Path(sandbox.__file__), root / "sandbox.py")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "CANARY_SECRET": CANARY, "HOME": str(root)}
    python = "/usr/bin/python3" if as_user else sys.executable  # a normal user may not read the caller's venv
    try:
        done = subprocess.run(
            [*as_user, python, "-c", code, ATTACK, str(ws), str(hidden), token],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode == 77:
            pytest.skip(f"no sandbox for this user: {done.stdout.strip()}")
        assert done.returncode == 0, done.stderr
        time.sleep(0.3)
        assert _pids_with(token) == [], "the daemon outlived the sandbox"
    finally:
        for pid in _pids_with(token):
            os.kill(pid, signal.SIGKILL)
    report = (ws / "report.txt").read_text()
    assert not (hidden / "planted").exists() and not Path("/usr/planted").exists()
    return report


@pytest.mark.parametrize("user", ["caller", "nobody"])
def test_the_sandbox_holds_as_root_and_as_a_normal_user(user):
    if user == "nobody" and os.geteuid() != 0:
        pytest.skip("switching to a normal user needs root; the caller is already one (the 'caller' case)")
    if user == "nobody" and not Path("/usr/bin/python3").is_file():
        pytest.skip("the normal-user case runs the stdlib harness with /usr/bin/python3, absent here")
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user == "nobody" else []
    root = Path(tempfile.mkdtemp(prefix="ate-sandbox-test-"))  # not under pytest's 0700 tmp: `nobody` enters it
    try:
        report = _sandboxed_attack(root, as_user)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert CANARY not in report and str(REPO_ROOT) not in report and "checker.py" not in report
    assert "wrote-ws" in report and "devnull" in report and "CapEff:\t0000000000000000" in report
    assert report.splitlines()[-1] == ("65534" if user == "nobody" else str(os.geteuid()))


def test_sandbox_refuses_unless_told(dirs, monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "unavailable", lambda: "`unshare` (util-linux) is not on PATH")
    argv = ["--tasks-dir", str(TOY_TASKS), "run", "--task", "qa-02", "--framework", "pithtrain", "--agent", "gold"]
    argv += ["--results-dir", str(dirs["results_dir"]), "--work-root", str(dirs["work_root"])]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no sandbox: `unshare` (util-linux) is not on PATH" in err and "--no-sandbox" in err
    assert main(argv + ["--no-sandbox"]) == 0
    (path,) = dirs["results_dir"].glob("*/record.json")
    assert json.loads(path.read_text())["sandbox"] == {"isolated": False, "why": "--no-sandbox"}
    # check and validate run checkers: the same refusal, the same way out.
    for cmd in (["check", "--record", str(path)], ["validate", "--tasks", "qa-02", "--out", str(dirs["results_dir"])]):
        cmd += ["--work-root", str(dirs["work_root"])] if cmd[0] == "validate" else []
        assert main(["--tasks-dir", str(TOY_TASKS), *cmd]) == 2
        assert "no sandbox: `unshare` (util-linux) is not on PATH" in capsys.readouterr().err
        assert main(["--tasks-dir", str(TOY_TASKS), *cmd, "--no-sandbox"]) == 0
    (validation,) = dirs["results_dir"].glob("*.json")
    assert json.loads(validation.read_text())["sandbox"] == {"isolated": False}


@pytest.mark.skipif(not Path("/dev/nvidiactl").exists(), reason="no NVIDIA GPU here (benchmarks/gpu_run.sh runs this)")
@needs_sandbox
def test_gpus_are_usable_in_the_sandbox(tmp_path):
    """The sandbox's /dev keeps the GPUs: nvidia-smi and a CUDA tensor work inside, as outside."""
    probe = "import torch; x = torch.ones(1024, device='cuda'); print('cuda', torch.cuda.device_count(), int(x.sum()))"
    script = f'nvidia-smi -L | head -1; {sys.executable} -c "{probe}"'
    box = sandbox.make_sandbox([tmp_path], [], [REPO_ROOT], os.environ["PATH"], "bash")
    done = subprocess.run(sandbox.wrap(["bash", "-c", script], box), cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    outside = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines()[0]
    assert done.stdout.splitlines()[0] == outside
    assert done.stdout.splitlines()[1].startswith("cuda ") and done.stdout.split()[-1] == "1024"


def test_the_probe_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sandbox.unavailable.__wrapped__() == "`unshare` (util-linux) is not on PATH"
    fake = tmp_path / "unshare"  # as where namespaces are forbidden (a container, an AppArmor rule)
    fake.write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    why = sandbox.unavailable.__wrapped__()
    assert why.endswith("failed here: unshare: unshare failed: Operation not permitted"), why
