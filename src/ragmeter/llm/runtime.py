"""The judge's event loop (one thread per process) and the provider clients it has opened.

:class:`_Runtime` keeps clients per configuration so later runs in a process reuse warm connections;
:func:`warm_judge` opens a run's client in the background before its first request is needed.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from typing import Any

from ragmeter.llm.config import JudgeConfig, config_from_options
from ragmeter.llm.providers import make_client


class _Runtime:
    """The judge's event loop, one thread per process, and the provider clients it has opened.

    Clients are kept per configuration (and key), so later runs in the same process -- a grid
    search, a notebook, a benchmark -- reuse warm connections instead of paying for a new client
    and new TCP/TLS handshakes. Everything is closed at interpreter exit.
    """

    _instance: _Runtime | None = None
    _lock = threading.Lock()
    MAX_CLIENTS = 8

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ragmeter-judge", daemon=True)
        self.thread.start()
        self.clients: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._opening: dict[tuple[Any, ...], asyncio.Task[Any]] = {}

    @classmethod
    def get(cls) -> _Runtime:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
                import atexit

                atexit.register(cls.shutdown)
            return cls._instance

    async def client(self, cfg: JudgeConfig) -> Any:
        key = (cfg, hashlib.sha256((cfg.api_key() or "").encode()).hexdigest())
        if key in self.clients:
            self.clients.move_to_end(key)
            return self.clients[key]
        # one opening per configuration: a warm-up (see warm_judge) and the first call share it
        task = self._opening.get(key)
        if task is None:
            task = self._opening[key] = self.loop.create_task(self._open(key, cfg))
            task.add_done_callback(lambda _t: self._opening.pop(key, None))
        return await asyncio.shield(task)

    async def _open(self, key: tuple[Any, ...], cfg: JudgeConfig) -> Any:
        client = make_client(cfg)
        await client.start()
        self.clients[key] = client
        while len(self.clients) > self.MAX_CLIENTS:
            _, old = self.clients.popitem(last=False)
            await _close_quietly(old)
        return client

    @classmethod
    def shutdown(cls) -> None:
        """Close every client and stop the loop (at exit; tests may call it too)."""
        with cls._lock:
            rt, cls._instance = cls._instance, None
        if rt is None:
            return

        async def close_all() -> None:
            for c in rt.clients.values():
                await _close_quietly(c)
            rt.clients.clear()

        try:
            asyncio.run_coroutine_threadsafe(close_all(), rt.loop).result(timeout=10)
        except Exception:  # noqa: BLE001 - shutting down: nothing left to report to
            pass
        rt.loop.call_soon_threadsafe(rt.loop.stop)
        rt.thread.join(timeout=10)


def warm_judge(options: dict[str, Any]) -> None:
    """Open the configured judge's provider client in the background (the judge's event loop
    imports the transport and opens its connection pool) while the caller goes on loading data and
    creating the run; the pre-flight and the first calls then find it open. Nothing is sent. A
    configuration that cannot be opened is left to the pre-flight, which reports why."""
    try:
        cfg = config_from_options(options)
    except Exception:  # noqa: BLE001 - no judge or a bad one: the run's own checks say so
        return
    if cfg.dry_run:
        return
    runtime = _Runtime.get()

    async def warm() -> None:
        try:
            await runtime.client(cfg)
        except Exception:  # noqa: BLE001 - reported by the pre-flight or the first call
            pass

    asyncio.run_coroutine_threadsafe(warm(), runtime.loop)


async def _close_quietly(client: Any) -> None:
    try:
        await client.close()
    except Exception:  # noqa: BLE001 - a client that cannot close cleanly is dropped anyway
        pass
