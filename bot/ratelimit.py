"""Token buckets per user and per channel (thread-safe; time is injectable for tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, per_minute: float, burst: int, now: Callable[[], float] = time.monotonic):
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.tokens = float(burst)
        self.now = now
        self.stamp = now()

    def peek(self) -> float:
        """Like ``take`` but consumes nothing: 0.0 when a token is available, else the seconds to wait."""
        t = self.now()
        tokens = min(self.burst, self.tokens + (t - self.stamp) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self) -> float:
        """0.0 when a token was taken, else the seconds until one is available."""
        t = self.now()
        self.tokens = min(self.burst, self.tokens + (t - self.stamp) * self.rate)
        self.stamp = t
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimiter:
    """One bucket per key; ``check(user, channel)`` takes from both or from neither."""

    def __init__(
        self,
        user_per_minute: float,
        user_burst: int,
        channel_per_minute: float,
        channel_burst: int,
        now: Callable[[], float] = time.monotonic,
        max_keys: int = 50_000,
    ):
        self._cfg = {"user": (user_per_minute, user_burst), "channel": (channel_per_minute, channel_burst)}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._lock = threading.Lock()
        self._now = now
        self._max = max_keys

    def _bucket(self, kind: str, key: str) -> TokenBucket:
        b = self._buckets.get((kind, key))
        if b is None:
            if len(self._buckets) >= self._max:
                self._buckets.clear()  # bounded memory; a reset only ever lets users through
            b = self._buckets[(kind, key)] = TokenBucket(*self._cfg[kind], now=self._now)
        return b

    def peek(self, user: str, channel: str) -> tuple[str, float] | None:
        """Would ``check`` allow it? Consumes nothing (an adapter asks before downloading an attachment)."""
        with self._lock:
            for kind, key in (("user", user), ("channel", channel)):
                wait = self._bucket(kind, key).peek()
                if wait:
                    return kind, wait
            return None

    def check(self, user: str, channel: str) -> tuple[str, float] | None:
        """None when allowed; else ("user" | "channel", seconds to wait)."""
        with self._lock:
            ub, cb = self._bucket("user", user), self._bucket("channel", channel)
            wait = ub.take()
            if wait:
                return "user", wait
            wait = cb.take()
            if wait:
                ub.tokens = min(ub.burst, ub.tokens + 1.0)  # give the user's token back
                return "channel", wait
            return None
