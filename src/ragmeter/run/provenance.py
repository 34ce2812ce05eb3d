"""Where a run came from: the git commit of the working directory (or the CI's), recorded with
each run so quality can be followed commit by commit (``ragmeter trend``)."""

from __future__ import annotations

import os
import subprocess

#: CI variables that name the commit being built, checked before asking git.
_CI_COMMIT_VARS = ("RAGMETER_GIT_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA", "BUILD_SOURCEVERSION",
                   "GIT_COMMIT")


def provenance() -> dict[str, str | bool | None]:
    """``{"git_commit": sha or None, "git_dirty": bool or None}`` for the current directory."""
    for var in _CI_COMMIT_VARS:
        if os.environ.get(var):
            return {"git_commit": os.environ[var].strip(), "git_dirty": None}
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=2, check=False)
        if sha.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=2, check=False)
        return {"git_commit": sha.stdout.strip() or None,
                "git_dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
