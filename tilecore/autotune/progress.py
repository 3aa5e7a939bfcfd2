"""The progress bar of a tuning run: compile and timing progress on a terminal, silence elsewhere.

Drawn with rich on stderr when stderr is a terminal and rich is installed
(`pip install rich`); in logs, CI and pipes nothing is printed.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator, Optional


def _terminal() -> bool:
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


@contextlib.contextmanager
def progress(description: str, total: int, enabled: Optional[bool] = None) -> Iterator[Callable[[], None]]:
    """Yield `advance()`, which moves a bar of `total` steps labelled `description` by one."""
    if enabled is None:
        enabled = _terminal()
    bar = None
    if enabled and total > 0:
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:
            bar = None
        else:
            bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
    if bar is None:
        yield lambda: None
        return
    with bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)
