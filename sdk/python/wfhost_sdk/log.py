"""Logging into the block's log.

Inside the host, lines go through the ``wfhost:plugin/log`` import (the
build installs that sink). Natively (a plugin's tests) they go to stderr,
or to a list inside ``with log.capture() as lines:``.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator, List, Tuple

LEVELS = ("trace", "debug", "info", "warn", "error")

Sink = Callable[[str, str], None]


def _stderr(level: str, message: str) -> None:
    print(f"[{level.upper()}] {message}", file=sys.stderr)


_sink: Sink = _stderr


def set_sink(sink: Sink) -> None:
    """Send every line to ``sink(level, message)``."""
    global _sink
    _sink = sink


def emit(level: str, message: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    _sink(level, str(message))


def trace(message: str) -> None:
    emit("trace", message)


def debug(message: str) -> None:
    emit("debug", message)


def info(message: str) -> None:
    emit("info", message)


def warn(message: str) -> None:
    emit("warn", message)


def error(message: str) -> None:
    emit("error", message)


@contextlib.contextmanager
def capture() -> Iterator[List[Tuple[str, str]]]:
    """Collect the lines logged inside the block as ``(level, message)``."""
    global _sink
    lines: List[Tuple[str, str]] = []
    before = _sink
    _sink = lambda level, message: lines.append((level, message))
    try:
        yield lines
    finally:
        _sink = before
