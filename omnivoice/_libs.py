"""Load ggml's shared libraries before ``omnivoice._core``.

The extension's run-path points at ``libggml`` beside it in site-packages, but that misses
installs where libggml-python sits in another ``sys.path`` entry (``pip --target``,
``PYTHONPATH``). Loading the libraries here first makes ``_core``'s NEEDED entries resolve by
SONAME wherever they are.
"""

from __future__ import annotations

import ctypes
import os


def preload() -> None:
    import libggml

    root = os.path.dirname(libggml.__file__)
    for sub in ("lib64", "lib"):
        libdir = os.path.join(root, sub)
        if os.path.exists(os.path.join(libdir, "libggml.so.0")):
            break
    else:
        raise ImportError(f"libggml-python at {root} has no libggml.so.0 under lib64/ or lib/")
    for name in ("libggml-base.so.0", "libggml-cpu.so.0", "libggml.so.0"):
        ctypes.CDLL(os.path.join(libdir, name))


preload()
