"""What the command-line tools share: argument types and the one-line error convention."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def one_line(message: str) -> str:
    """The first paragraph of a (possibly multi-line) error message, on one line."""
    first = message.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in first.splitlines())


def run_command(prog: str, run: Callable[[], None]) -> int:
    """Runs ``run``; a user-facing error becomes one line on stderr and exit status 1."""
    logging.basicConfig(level=logging.WARNING, format=f"{prog}: %(message)s")
    try:
        run()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (ValueError, FileNotFoundError, OSError, RuntimeError) as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    return 0
