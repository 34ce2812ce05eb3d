"""Verdicts are stored before their call counts as done.

A judge call holds its concurrency slot until its verdict is in the store's judge cache
(:meth:`VerdictKeeper.keep`), so at any moment the calls whose replies ragmeter received but has not
stored are among those holding a slot: a process killed at any point leaves at most
``judge_concurrency`` paid calls unstored, and ``eval --resume`` re-sends at most those. Before,
a reply released its slot on arrival and waited for the scoring thread to store it (every 0.1 s,
after scoring and storing the samples it answered), so a kill re-sent the calls in flight *and*
the replies waiting: 18 to 21 at a concurrency of 16 against a judge answering in 0.2 s.

Verdicts arriving together share one transaction (a group commit, written in a worker thread so
the event loop keeps sending), so storing them one by one costs no throughput.
"""

from __future__ import annotations

import asyncio
from typing import Any


class VerdictKeeper:
    """Writes judge-cache rows as they arrive, in group commits, on the judge's event loop.

    Args:
        store: the results store (``put_judge_cache`` inserts rows, ignoring keys already there).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._queue: list[tuple[dict[str, Any], asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None
        #: keys stored here and not yet accounted: the scoring thread's accounting skips (and
        #: forgets) them instead of writing them again
        self.kept: set[str] = set()

    async def keep(self, row: dict[str, Any]) -> bool:
        """Store one judge-cache row; ``True`` once it is committed, ``False`` when the write
        failed (the caller's later accounting writes it then, as before)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._queue.append((row, fut))
        if self._writer is None:
            self._writer = loop.create_task(self._write())
        # shielded: a call cancelled while its verdict is being written leaves the write to finish
        return await asyncio.shield(fut)

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                rows = list({r["key"]: r for r, _ in batch}.values())
                try:
                    await loop.run_in_executor(None, self._put, rows)
                    ok = True
                except Exception:  # noqa: BLE001 - a failed write is retried by the accounting's write
                    ok = False
                if ok:
                    self.kept.update(r["key"] for r in rows)
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(ok)
        finally:
            self._writer = None

    def _put(self, rows: list[dict[str, Any]]) -> None:
        with self.store.session() as s, s.begin():
            self.store.put_judge_cache(s, rows)
