"""Progress for long work, on any stream: a rich bar on a terminal, a line every ~10% otherwise.

Returns a plain ``(done, total) -> None`` callback (what ``indexer.build.build_index`` takes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any


def progress_callback(stream: IO[str], what: str = "embedding") -> Callable[[int, int], None]:
    if getattr(stream, "isatty", lambda: False)():
        return _bar(stream, what)
    state = {"next": 0}

    def lines(done: int, total: int) -> None:
        pct = 100 * done // max(total, 1)
        if pct >= state["next"] or done >= total:
            print(f"{what}: {done}/{total} ({pct}%)", file=stream, flush=True)
            state["next"] = pct - pct % 10 + 10

    return lines


def _bar(stream: IO[str], what: str) -> Callable[[int, int], None]:
    from rich.console import Console
    from rich.progress import Progress

    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if "p" not in state:
            state["p"] = Progress(transient=True, console=Console(file=stream))
            state["p"].start()
            state["t"] = state["p"].add_task(what, total=total)
        state["p"].update(state["t"], completed=done)
        if done >= total:
            state["p"].stop()

    return update
