"""The agent's (and the checker's) sandbox: Linux namespaces, made with `unshare` and this file as init.

`wrap(argv, box)` turns a command into one that runs it inside a sandbox:

    unshare [--user --map-root-user] --pid --fork --kill-child --mount-proc --mount \\
        PYTHON -S -I ate_bench/sandbox.py SPEC -- ARGV...

Inside the new mount and PID namespaces this file (`_init`, PID 1) builds the view the command gets:
- a recursive bind of `/` whose every mount is remounted read-only;
- an empty read-only tmpfs over each hidden path (the checkout, the results, the work root with every
  other run's workspace, the download cache, the caller's HOME and the system temp directory);
- `box.writable` (workspace, HOME, TMPDIR) bound back read-write and `box.readable` (the harness's
  Python, PATH prefixes, a checker's task files) bound back read-only at their own paths; the deepest
  rule wins where they nest;
- a fresh /dev with the usual character devices and the GPUs' (no block devices) and a private /dev/shm;
- /proc of the new PID namespace (no other process, so no other environ or cwd), with /proc/sys
  and /proc/sysrq-trigger read-only.
It then pivots into that view, forks the command with every capability dropped (bounding set
included) and no_new_privs, forwards SIGTERM/SIGINT/SIGHUP to it and exits when it exits: the kernel
then kills every process left in the namespace, daemons that double-forked included. `--kill-child`
does the same if `unshare` itself is killed.

As root it runs without a user namespace; as a normal user it needs unprivileged user namespaces
(`--user --map-root-user`). `unavailable()` says what is missing, once per process.
"""

import ctypes
import json
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# mount(2) flags (linux/mount.h) and statvfs(3) flags (sys/statvfs.h).
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
ST_TO_MS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME, 2048: MS_NODIRATIME}
ST_RELATIME = 4096
# pivot_root(2) has no glibc wrapper: its syscall number per architecture.
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
CLONE_NEWUSER = 0x10000000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
# What the sandbox's /dev holds: the usual character devices, and every GPU and RDMA device node.
DEV_NAMES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts")
DEV_PREFIXES = ("nvidia", "dri", "infiniband", "kfd")
# Written to by a process with uid 0 and no capabilities (DAC only): read-only in the sandbox.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")


@dataclass(frozen=True)
class Sandbox:
    """Absolute paths; each is bound (or hidden) at its own path inside."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...]
    hidden: tuple[Path, ...]

    def record(self) -> dict:
        return {
            "isolated": True,
            "writable": [str(p) for p in self.writable],
            "readable": [str(p) for p in self.readable],
            "hidden": [str(p) for p in self.hidden],
        }


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def make_sandbox(
    writable: list[Path], readable: list[Path], hidden: list[Path], path_env: str, program: str
) -> Sandbox:
    """A sandbox that also keeps, read-only, what the command needs from under a hidden path: the harness's
    Python (its prefixes), the prefix of each PATH entry (`~/.pyenv` for `~/.pyenv/shims`, `~/.local` for
    `~/.local/bin`; the entry alone where its parent is a hidden path itself, as `~` is for `~/bin`) and
    the directory `program` (argv[0], found on `path_env`) really lives in, links followed."""
    hidden = sorted({p.resolve() for p in hidden} - {Path("/")})  # a HOME of `/` hides nothing
    needed = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    for entry in (e for e in path_env.split(os.pathsep) if os.path.isabs(e)):
        d = Path(entry).resolve()
        needed.append(d if d.parent in hidden else d.parent)
    found = shutil.which(program, path=path_env)
    if found:
        needed.append(Path(found).resolve().parent)
    keep = [p for p in needed if os.path.isdir(p) and _under(p, hidden)]
    return Sandbox(
        writable=tuple(dict.fromkeys(p.resolve() for p in writable)),
        readable=tuple(dict.fromkeys([*(p.resolve() for p in readable), *keep])),
        hidden=tuple(hidden),
    )


def wrap(argv: list[str], box: Sandbox) -> list[str]:
    """`argv` run inside `box` (the cwd is kept; it must be a path the sandbox shows)."""
    stage = _stage()
    spec = {k: [str(p) for p in getattr(box, k)] for k in ("writable", "readable", "hidden")}
    spec = json.dumps({**spec, "uid": os.geteuid(), "gid": os.getegid()})
    user = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
    ns = ["unshare", *user, "--pid", "--fork", "--kill-child", "--mount-proc", "--mount"]
    return [*ns, sys.executable, "-S", "-I", str(Path(__file__).resolve()), spec, str(stage), "--", *argv]


def _stage() -> Path:
    """The new root's mount point: an empty directory of this user's. Every sandbox may share it: each
    mounts on it in its own mount namespace, so nothing is ever written there."""
    stage = Path(tempfile.gettempdir()) / f"ate-bench-sandbox-root-{os.geteuid()}"
    stage.mkdir(mode=0o700, exist_ok=True)
    st = stage.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(f"{stage} is not a directory of this user's; remove it")
    return stage


@cache
def unavailable() -> str:
    """Why no sandbox can be made here ("" when one can): the probe runs `true` in a real one."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not on PATH"
    if platform.machine() not in SYS_PIVOT_ROOT:
        return f"pivot_root's syscall number is not known for {platform.machine()}"
    with tempfile.TemporaryDirectory(prefix="ate-sandbox-probe-") as tmp:
        (Path(tmp) / "hidden" / "w").mkdir(parents=True)
        box = make_sandbox([Path(tmp) / "hidden" / "w"], [], [Path(tmp) / "hidden"], "", "true")
        try:
            argv = wrap(["true"], box)
        except OSError as e:
            return str(e)
        done = subprocess.run(argv, cwd=box.writable[0], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        how = "user namespaces (`unshare --user --map-root-user`)" if os.geteuid() != 0 else "`unshare --mount --pid`"
        last = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return f"{how} failed here: {last}"
    return ""


# Everything below runs inside the namespaces, as PID 1.

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if s is None else s.encode() for s in (src, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {src} on {target}")


def _remount_read_only(target: str) -> None:
    """Read-only, keeping the mount's other flags (a user namespace may not drop nosuid/nodev/noexec)."""
    st = os.statvfs(target)
    flags = sum(ms for f, ms in ST_TO_MS.items() if st.f_flag & f) | (MS_RELATIME if st.f_flag & ST_RELATIME else 0)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _mount_points(root: str) -> list[str]:
    """Mount points at or under `root`, from /proc/self/mountinfo (octal escapes decoded)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == root or point.startswith(root + "/"):
            out.append(point)
    return out


def _make_dev(new: str) -> None:
    """A tmpfs /dev holding the allowed host nodes (bound), the std links and a private /dev/shm."""
    dev = new + "/dev"
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755")
    for name in sorted(os.listdir("/dev")):
        if name not in DEV_NAMES and not name.startswith(DEV_PREFIXES):
            continue
        src, dst = "/dev/" + name, dev + "/" + name
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
            continue
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            open(dst, "w").close()
        _mount(src, dst, None, MS_BIND | MS_REC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, dev + "/" + name)
    os.symlink("/proc/self/fd/2", dev + "/stderr")
    os.mkdir(dev + "/shm")
    _mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")


def _build_root(new: str, spec: dict) -> None:
    """Mount the sandbox's view at `new` (see the module docstring)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("/", new, None, MS_BIND | MS_REC)
    rules = [(p, "hidden") for p in spec["hidden"]] + [(p, "readable") for p in spec["readable"]]
    rules += [(p, "writable") for p in spec["writable"]]
    for path, kind in sorted(rules, key=lambda r: r[0].count("/")):  # shallow first: the deepest rule wins
        target = new + path
        if kind == "hidden":
            if os.path.isdir(target):
                _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            continue
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)  # only ever inside a hidden path's tmpfs
        elif not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "w").close()
        _mount(path, target, None, MS_BIND | MS_REC)
    _make_dev(new)
    for name in PROC_READ_ONLY:
        target = f"{new}/proc/{name}"
        if os.path.exists(target):
            _mount(target, target, None, MS_BIND)
    keep = [new + p for p in spec["writable"]] + [new + "/dev/shm", new + "/dev/pts", new + "/proc"]
    proc_read_only = [f"{new}/proc/{name}" for name in PROC_READ_ONLY]
    for point in _mount_points(new):
        if _at_or_under(point, keep) and not _at_or_under(point, proc_read_only):
            continue
        if not os.statvfs(point).f_flag & 1:  # ST_RDONLY
            _remount_read_only(point)


def _at_or_under(point: str, roots: list[str]) -> bool:
    return any(point == r or point.startswith(r + "/") for r in roots)


def _enter(new: str) -> None:
    """pivot_root into `new` and detach the old root (the same-directory form needs no put_old)."""
    os.chdir(new)
    _check(_libc.syscall(SYS_PIVOT_ROOT[platform.machine()], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the old root")


def _be_caller(uid: int, gid: int) -> None:
    """As a normal user: a nested user namespace where the command is the caller's uid, not root (Claude
    Code refuses to bypass its permission prompts as root); files it makes are the caller's either way."""
    _check(_libc.unshare(CLONE_NEWUSER), "unshare a nested user namespace")
    Path("/proc/self/uid_map").write_text(f"{uid} 0 1\n")
    Path("/proc/self/setgroups").write_text("deny\n")
    Path("/proc/self/gid_map").write_text(f"{gid} 0 1\n")


def _drop_privileges() -> None:
    """No capability survives exec (bounding, inheritable and ambient sets emptied); no setuid gain."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capget(header, data), "capget")
    data[2] = data[5] = 0  # inheritable, both words
    _check(_libc.capset(header, data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _run_as_init(argv: list[str], cwd: str, uid: int, gid: int) -> int:
    """Fork the command; forward stop signals to it; reap every orphan; return its status."""
    child = os.fork()
    if child == 0:
        try:
            if uid != 0:
                _be_caller(uid, gid)
            _drop_privileges()
            os.chdir(cwd)
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"ate_bench sandbox: cannot run {argv[0]}: {e}", file=sys.stderr)
        os._exit(127)

    def forward(sig: int, frame: object) -> None:
        try:
            os.kill(child, sig)
        except ProcessLookupError:
            pass  # it has exited; the wait below sees it

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 127
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _init(spec_json: str, stage: str, argv: list[str]) -> int:
    cwd, spec = os.getcwd(), json.loads(spec_json)
    try:
        _build_root(stage, spec)
        _enter(stage)
    except OSError as e:
        print(f"ate_bench sandbox: {e}", file=sys.stderr)
        return 125
    return _run_as_init(argv, cwd, spec["uid"], spec["gid"])


if __name__ == "__main__":
    sys.exit(_init(sys.argv[1], sys.argv[2], sys.argv[4:]))
