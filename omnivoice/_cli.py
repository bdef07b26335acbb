"""What the command-line tools share: argument types and the one-line error convention."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def _number(text: str, kind: type, ok: Callable[[float], bool], what: str) -> Any:
    """argparse type: ``kind(text)`` (int or float), finite and passing ``ok``."""
    try:
        value = kind(text)
    except ValueError:  # argparse would say "invalid positive_int value"
        value = math.nan
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    return _number(text, int, lambda v: v > 0, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds)."""
    return _number(text, int, lambda v: v >= 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    return _number(text, float, lambda v: v > 0, "a positive number")


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    return _number(text, float, lambda v: v >= 0, "a number >= 0")


def finite_float(text: str) -> float:
    """argparse type: a finite number."""
    return _number(text, float, lambda v: True, "a finite number")


def add_device_argument(p: argparse.ArgumentParser) -> None:
    """``--device``, the one way every command picks its compute device."""
    p.add_argument("--device", help="compute device: cpu, a GPU such as CUDA0, or rpc://HOST:PORT (an "
                   "omnivoice-rpc-server); default: the best ggml offers (a GPU when built with one, else the CPU)")


def check_output_path(path: str | os.PathLike[str]) -> None:
    """Raises ValueError, with the reason, when a file cannot be written at ``path`` (checked
    before any work, so a long generation does not end in a failed write)."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ValueError(f"output {path} is a directory; give a file name")
    if not parent.is_dir():
        raise ValueError(f"output directory {parent} does not exist")
    if not os.access(path if path.exists() else parent, os.W_OK):
        raise ValueError(f"no permission to write {path}")


def one_line(message: str) -> str:
    """The first paragraph of a (possibly multi-line) error message, on one line."""
    first = message.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in first.splitlines())


def run_command(prog: str, run: Callable[[], None]) -> int:
    """Runs ``run``; any error becomes one line on stderr and exit status 1 (never a traceback),
    and a warning one ``prog: warning: ...`` line."""
    logging.basicConfig(level=logging.WARNING, format=f"{prog}: %(message)s")

    def show(message: Warning | str, *_: object, **__: object) -> None:
        print(f"{prog}: warning: {one_line(str(message))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")  # shown once each, as lines, never raised
        warnings.showwarning = show
        try:
            run()
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        except Exception as e:  # noqa: BLE001 - bad input, a bug or a library's own error: one line
            # The message alone: a class name tells a user nothing they can act on.
            message = one_line(str(e)) or "an internal error without a message (please report it)"
            print(f"{prog}: error: {message}", file=sys.stderr)
            return EXIT_ERROR
    return 0
