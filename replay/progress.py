"""Small progress display for long work: a tqdm bar (terminal or notebook) or nothing.

Three ways to use it:

* `track(items, total=..., desc=...)`: wrap an iterable, like `tqdm(...)`.
* `with bar(total, desc=...) as b: b.update(n)`: a bar you drive yourself.
* `with poll(read, total, desc=...):` a background thread calls `read()` every `interval` seconds while the block runs
  and moves the bar to what it returns, a `done` count or a `(done, postfix)` pair. This is how the Spark ingest
  shows work that happens on executors (the reading function looks at accumulators or the status tracker).

`enabled=False` (or env `KRAFT_REPLAY_PROGRESS=0`) turns every bar into a silent no-op with the same interface, so
callers never branch. `say(line)` prints one status line without breaking a bar that is on screen.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

ENV = "KRAFT_REPLAY_PROGRESS"


def wanted(enabled: bool = True) -> bool:
    """Whether to draw: the caller asked for it and the environment does not forbid it."""
    return enabled and os.environ.get(ENV, "1").lower() not in ("0", "false", "no", "off")


class _Silent:
    """The no-op bar: the subset of tqdm's interface the helpers use."""

    n: float = 0
    total: float | None = None

    def update(self, n: float = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def set_description_str(self, desc: str | None = None, refresh: bool = True) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def _tqdm(**kwargs: Any) -> Any:
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("leave", True)
    return tqdm(**kwargs)


@contextmanager
def bar(
    total: float | None = None, desc: str = "", unit: str = "it", unit_scale: bool = False, enabled: bool = True
) -> Iterator[Any]:
    """A progress bar for the duration of the block (a tqdm, or a silent stand-in when disabled)."""
    b = _tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale) if wanted(enabled) else _Silent()
    try:
        yield b
    finally:
        b.close()


def track(
    items: Iterable[T], total: int | None = None, desc: str = "", unit: str = "it", enabled: bool = True
) -> Iterator[T]:
    """Iterate `items` with a bar."""
    with bar(total=total, desc=desc, unit=unit, enabled=enabled) as b:
        for item in items:
            yield item
            b.update(1)


@contextmanager
def poll(
    read: Callable[[], float | tuple[float, str]],
    total: float | None = None,
    desc: str = "",
    unit: str = "it",
    unit_scale: bool = False,
    interval: float = 1.0,
    enabled: bool = True,
) -> Iterator[Any]:
    """Move a bar from a background thread to whatever `read()` reports, until the block ends.

    `read` returns the amount done so far (absolute, not an increment), optionally with a postfix text. It runs on
    the polling thread; an exception in it stops the polling but never the work. A final poll runs at the end.
    """
    if not wanted(enabled):
        yield _Silent()
        return
    stop = threading.Event()
    b = _tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale)
    lock = threading.Lock()
    shown = [""]

    def step() -> bool:
        try:
            got = read()
        except Exception:
            return False
        done, postfix = got if isinstance(got, tuple) else (got, "")
        with lock:
            if total is not None:
                done = min(done, total)
            changed = False
            if postfix and postfix != shown[0]:
                shown[0] = postfix
                b.set_postfix_str(postfix, refresh=False)
                changed = True
            if done > b.n:
                b.update(done - b.n)  # draws, with the new postfix
            elif changed:
                b.refresh()
        return True

    def loop() -> None:
        while not stop.wait(interval):
            if not step():
                return

    thread = threading.Thread(target=loop, name="replay-progress", daemon=True)
    thread.start()
    try:
        yield b
    finally:
        stop.set()
        thread.join(timeout=5)
        step()
        b.close()


def say(line: str, enabled: bool = True) -> None:
    """Print one status line to stderr (through tqdm so that a live bar is not torn)."""
    if not wanted(enabled):
        return
    try:
        tqdm.write(line, file=sys.stderr)
    except Exception:  # pragma: no cover - a broken stream
        print(line, file=sys.stderr, flush=True)
