"""The Ray runtime a run's engine uses: started (or joined) once per process, with the environment
its workers need to score as the driver does.

Workers get the ``RAGMETER_*`` settings, offline model-loading variables, and ``PYTHONPATH`` on a
local runtime (:func:`worker_env`) through Ray's ``runtime_env``. Ray writes a runtime_env in plain
text to every node's ``runtime_env_agent.log``, so nothing secret goes there: not ``RAGMETER_DB``, no
secret-named variable, no value the redaction layer would mask. The store URL (which may carry a
password) reaches the workers only as a task argument (:mod:`ragmeter.run.engines.ray_engine`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import ConfigError

#: variables that make a worker load models as the driver does (offline, same caches)
WORKER_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "SENTENCE_TRANSFORMERS_HOME")
#: ``RAGMETER_*`` variables never sent: the store URL (it travels with the tasks and may hold a
#: password) and pointers to credentials, which only the driver (judge, sinks) reads
NOT_SENT = frozenset({"RAGMETER_DB", "RAGMETER_CREDENTIALS", "RAGMETER_SHEETS_CREDENTIALS"})


def worker_env(local: bool = True, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables sent to Ray workers (``runtime_env["env_vars"]``).

    ``RAGMETER_*`` settings (plugins, caches ...) and :data:`WORKER_VARS`; ``PYTHONPATH`` only to
    a local runtime (a cluster's nodes have their own paths). Never :data:`NOT_SENT`, a
    secret-named variable (``RAGMETER_INGEST_TOKEN``) or a value that holds a credential (a URL
    with a password): Ray logs the runtime_env in plain text.
    """
    from ragmeter.core.redact import is_secret_name, redact

    env = os.environ if environ is None else environ
    names = [k for k in env if k.startswith("RAGMETER_") and k not in NOT_SENT and not is_secret_name(k)]
    names += [k for k in (*WORKER_VARS, *(("PYTHONPATH",) if local else ())) if k in env]
    return {k: env[k] for k in names if redact(env[k]) == env[k]}


def init(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Start (or join) a Ray runtime once per process; return the ``ray`` module.

    Args:
        address: ``ray://HOST:PORT`` of a cluster, or ``None`` for a local runtime.
        num_cpus: CPUs of a local runtime (default: ``RAGMETER_RAY_NUM_CPUS`` or all).

    Raises:
        ConfigError: Ray is not installed, or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--engine ray needs Ray: pip install 'ragmeter-eval[ray]'") from exc
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "ignore_reinit_error": True}
        if address:
            kwargs["address"] = address
        else:
            env = os.environ.get("RAGMETER_RAY_NUM_CPUS")
            n = num_cpus or (int(env) if env else None)
            if n:
                kwargs["num_cpus"] = n
        kwargs["runtime_env"] = {"env_vars": worker_env(local=not address)}
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from None
    return ray
