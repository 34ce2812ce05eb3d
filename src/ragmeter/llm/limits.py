"""The judge's in-flight limit, adapted to what the provider tells it (AIMD, as TCP does).

Requests in flight start at the configured ``judge_concurrency``. The limit is *halved* when the
provider says it is overloaded (HTTP 429, 503, 529, or a request timing out), at most once per
window of requests (the requests already in flight when it shrank do not shrink it again); it
grows by one after each ``limit`` consecutive successes, back up to the configured maximum. A
success whose headers say fewer requests remain in the provider's current window
(``x-ratelimit-remaining-requests``, ``anthropic-ratelimit-requests-remaining``) than the limit
lowers the limit to that number. ``Retry-After`` pauses are the rate limiter's (``service.RateLimiter``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from typing import Any

#: HTTP statuses that mean "too many requests / overloaded" (529: Anthropic's "overloaded").
OVERLOAD_STATUSES = frozenset({429, 503, 529})

#: Headers, by provider, telling how many requests are left in the current rate-limit window.
REMAINING_HEADERS = ("x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining")


def remaining_requests(headers: Mapping[str, Any] | Any) -> int | None:
    """Requests left in the provider's window, from a reply's headers (``None``: not said)."""
    if not headers:
        return None
    for name in REMAINING_HEADERS:
        try:
            value = headers.get(name)
        except Exception:  # noqa: BLE001 - header containers differ between SDKs
            return None
        if value is not None:
            try:
                return max(0, int(float(value)))
            except (TypeError, ValueError):
                return None
    return None


class AdaptiveLimit:
    """An asyncio semaphore whose size follows the provider's signals (see the module docstring).

    Args:
        maximum: the configured concurrency: the limit starts there and never exceeds it.

    Use ``ticket = await limit.acquire()`` ... ``limit.release()`` on one event loop, and report
    each outcome with :meth:`success` or :meth:`overload` (passing the ticket).
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = max(1, int(maximum))
        self.limit = self.maximum
        self.lowest = self.maximum
        self.decreases = 0
        self.increases = 0
        self.in_flight = 0
        self._epoch = 0  # bumped at every decrease: requests started before it do not shrink it again
        self._streak = 0
        self._waiters: deque[asyncio.Future[int]] = deque()

    async def acquire(self) -> int:
        """Wait for a free slot (first come, first served); returns the ticket for :meth:`overload`."""
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return self._epoch
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            # the ticket is the window the slot was granted in: a decrease between the grant and
            # this task resuming must not count this request's 429 as a new overload
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed a slot, then cancelled: give it back
                self.release()
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():  # a cancelled waiter is skipped
                self.in_flight += 1  # the slot is handed over
                fut.set_result(self._epoch)

    def success(self, remaining: int | None = None) -> None:
        """A reply came back; ``remaining``: requests the provider says are left in its window."""
        if remaining is not None and remaining < self.limit:
            self._set(max(1, remaining), decrease=True)
            return
        self._streak += 1
        if self._streak >= self.limit and self.limit < self.maximum:
            self._set(self.limit + 1, decrease=False)

    def overload(self, ticket: int) -> None:
        """The provider said "too many" to a request that got ``ticket``: halve the limit, once
        per window (requests started before the last decrease do not halve it again)."""
        if ticket == self._epoch:
            self._set(max(1, self.limit // 2), decrease=True)

    def _set(self, value: int, *, decrease: bool) -> None:
        self._streak = 0
        if value == self.limit:
            return
        if decrease:
            self.decreases += 1
            self._epoch += 1
            self.lowest = min(self.lowest, value)
        else:
            self.increases += 1
        self.limit = value
        self._wake()

    def summary(self) -> str | None:
        """What changed, for the run summary (``None`` when the limit never went down)."""
        if not self.decreases:
            return None
        return (f"requests in flight lowered from {self.maximum} to {self.lowest} on the provider's "
                f"rate-limit signals ({self.decreases} decrease(s), {self.increases} increase(s)); "
                f"{self.limit} at the end")
