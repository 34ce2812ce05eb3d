"""Where a ``python`` grader's code runs: a bubblewrap sandbox (``isolated``, the default) or a plain
child process (``unisolated``, only when the user asks for it by name).

The sandbox (``bwrap`` from the Debian/Fedora package ``bubblewrap``, 0.8 or newer) gives the grader:

- its own PID, network, mount, IPC and UTS namespaces: it sees only its own processes (a fresh
  ``/proc``: no ``/proc/<ragmeter's pid>/environ``), has no network but an unconnected loopback, and
  every process it starts, ``setsid`` or not, is killed when the namespace's first process ends
  (bwrap's ``--die-with-parent``: when ragmeter ends or stops the grader);
- a read-only view of ``/usr`` and of the Python environment that runs ragmeter (the venv and the
  interpreter it was made from), nothing else of the file system: not the home folder, not the
  project, not the store; a private ``/tmp`` (a tmpfs of :data:`TMP_MB` MB) as its working folder;
- an empty environment but ``PATH``, ``LANG``, ``HOME``/``TMPDIR`` (``/tmp``) and thread counts of 1;
- a limit on its processes and threads (``RLIMIT_NPROC``). The kernel counts that limit per user in
  each user namespace (Linux 5.14 and later), so an unprivileged ragmeter gives each sandbox a user
  namespace of its own and the count covers that sandbox alone. When ragmeter runs as root the
  limit does not apply to root at all, so the grader drops to a uid of its own, drawn at random for
  each sandbox, before its code is read (bwrap keeps only ``CAP_SETUID``/``CAP_SETGID`` for that
  step; the uid change clears them).

:func:`unavailable` says why the sandbox cannot run here before trying one (bubblewrap missing or
too old), :func:`ragmeter.sandbox.python_grader.isolation_problem` after starting one
(namespaces not permitted): python graders are then refused with that message unless the user opts
out of isolation (``--unisolated-python-graders``).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ragmeter.sandbox import ISOLATED, MODES, UNISOLATED  # noqa: F401 - where they were

#: size of the grader's private /tmp (a tmpfs: memory outside its address-space limit)
TMP_MB = 256
MIN_BWRAP = (0, 8, 0)  # --size, --perms on --tmpfs, --disable-userns
INSTALL = ("install bubblewrap: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora), "
           "pacman -S bubblewrap (Arch)")
OPT_OUT = ("or run them without isolation with --unisolated-python-graders (they then see your files, "
           "network and processes: docs/openai-evals.md)")
#: uids a sandbox of a root ragmeter draws from (far above system, user and subordinate-id ranges)
_UID_BASE, _UID_SPAN = 1 << 30, 1 << 24
_SYSTEM_TOPS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def bwrap_path() -> str | None:
    """The ``bwrap`` program on ``PATH``, if any."""
    return shutil.which("bwrap")


def bwrap_version(path: str) -> tuple[int, ...] | None:
    """bubblewrap's version (``bwrap --version``: ``bubblewrap 0.8.0``), ``None`` when unreadable."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(x or 0) for x in m.groups()) if m else None


def python_roots() -> list[str]:
    """The folders the grader's interpreter needs besides ``/usr``: the environment that runs
    ragmeter (``sys.prefix``: a venv) and the interpreter it was made from (``sys.base_prefix``),
    outermost first, each once.

    Raises:
        RuntimeError: one of them is ``/``, the home folder or the current folder, or holds them:
            the sandbox would show the grader the files it must not see.
    """
    found: set[str] = set()
    for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
              str(Path(sys.executable).parent.parent)):
        for q in {os.path.abspath(p), os.path.realpath(p)}:
            found.add(q)
    guarded = {os.path.realpath(x) for x in (os.path.expanduser("~"), os.getcwd())}
    roots: list[str] = []
    for r in sorted(found, key=len):
        if r == "/usr" or r.startswith("/usr/") or any(r == x or r.startswith(x.rstrip("/") + "/") for x in roots):
            continue
        for g in guarded:
            if r == "/" or g == r or g.startswith(r.rstrip("/") + "/"):
                raise RuntimeError(f"the Python environment at {r} holds {g}, which a python grader must not see; "
                                   "run ragmeter from a virtual environment outside it")
        roots.append(r)
    return roots


def sandbox_argv(bwrap: str, command: Sequence[str], *, root: bool) -> list[str]:
    """bwrap's command line around ``command`` (see the module's docstring)."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
    if root:  # no user namespace: the grader's own uid (see drop_uid) is what the process limit counts
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all", "--unshare-user", "--disable-userns"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TOPS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    # the private /tmp first: a Python environment bound below it (a checkout under /tmp) is mounted
    # on top of it afterwards, not hidden by it
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_MB * 1024 * 1024), "--perms", "1777",
             "--tmpfs", "/tmp"]
    made: set[str] = {"/tmp"}

    def parents(path: str) -> list[str]:
        out = []
        for parent in reversed(Path(path).parents):
            p = str(parent)
            if p != "/" and p not in made:
                made.add(p)
                out += ["--perms", "0755", "--dir", p]  # bwrap would make them 0700: unreadable after the uid drop
        return out

    if os.path.exists("/etc/ld.so.cache"):
        argv += [*parents("/etc/ld.so.cache"), "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for r in python_roots():
        argv += [*parents(r), "--ro-bind", r, r]
    # /dev's tmpfs read-only too (its device nodes are mounts of their own and stay usable): /tmp,
    # of a bounded size, is the only place the grader can write
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    for k, v in _ENV.items():
        argv += ["--setenv", k, v]
    return [*argv, "--", *command]


def drop_uid(root: bool) -> int:
    """The uid (and gid) a sandboxed grader takes: a fresh one when ragmeter is root, else -1 (it keeps
    the user's, in a user namespace of its own)."""
    return _UID_BASE + secrets.randbelow(_UID_SPAN) if root else -1


def unavailable() -> str | None:
    """What makes the sandbox impossible here before trying one (not Linux, bwrap missing or too old,
    a Python environment that holds the home or current folder), ``None`` when nothing does; the
    sandbox's own check (:func:`ragmeter.sandbox.python_grader.isolation_problem`) then starts one."""
    if not sys.platform.startswith("linux"):
        return (f"python graders run isolated only on Linux (bubblewrap namespaces); this is {sys.platform}: "
                + OPT_OUT)
    bwrap = bwrap_path()
    if bwrap is None:
        return f"python graders run in a bubblewrap sandbox and `bwrap` is not installed: {INSTALL}; {OPT_OUT}"
    version = bwrap_version(bwrap)
    if version is None or version < MIN_BWRAP:
        found = ".".join(map(str, version)) if version else "an unknown version"
        return (f"python graders need bubblewrap {'.'.join(map(str, MIN_BWRAP))} or newer ({bwrap} is {found}): "
                f"{INSTALL}; {OPT_OUT}")
    try:
        python_roots()
    except RuntimeError as exc:
        return f"python graders cannot be isolated: {exc}; {OPT_OUT}"
    return None


def failed(bwrap: str, why: str) -> str:
    """The message of a sandbox that did not start: why, and what usually causes it."""
    return (f"bubblewrap ({bwrap}) could not start a sandbox here: {why}. Namespaces may not be permitted "
            "(user namespaces disabled: sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; "
            f"in a container, one that allows them); {OPT_OUT}")
