"""Fast reader of the key-value metadata of a GGUF file.

gguf-py's ``GGUFReader`` builds numpy views for every element of every array, which takes
about 20 s for the 151k tokens and merges of the OmniVoice LM vocabulary. This reader
parses only the header and the metadata section, with ``struct``, in well under a second.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from typing import Any

__all__ = ["read_metadata"]

_MAGIC = b"GGUF"
_SUPPORTED_VERSIONS = (2, 3)
_TYPE_STRING = 8
_TYPE_ARRAY = 9
# GGUF value type -> struct format of one scalar (little-endian).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class _Cursor:
    """Sequential little-endian reads from a bytes buffer, with a clear error at the end."""

    def __init__(self, data: bytes | mmap.mmap, path: str) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError(f"{self.path}: GGUF metadata is truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        return struct.unpack_from("<" + fmt, self.take(size))[0]

    def string(self) -> str:
        return self.take(self.scalar("Q")).decode("utf-8")

    def strings(self, count: int) -> list[str]:
        data, pos, out = self.data, self.pos, []
        size = len(data)
        for _ in range(count):
            if pos + 8 > size:
                raise ValueError(f"{self.path}: GGUF metadata is truncated")
            (n,) = struct.unpack_from("<Q", data, pos)
            out.append(data[pos + 8 : pos + 8 + n].decode("utf-8"))
            pos += 8 + n
        if pos > size:
            raise ValueError(f"{self.path}: GGUF metadata is truncated")
        self.pos = pos
        return out

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _TYPE_STRING:
            return self.string()
        if kind == _TYPE_ARRAY:
            elem, count = self.scalar("I"), self.scalar("Q")
            if elem == _TYPE_STRING:
                return self.strings(count)
            if elem in _SCALARS:
                fmt = _SCALARS[elem]
                return list(struct.unpack_from(f"<{count}{fmt}", self.take(count * struct.calcsize(fmt))))
            return [self.value(elem) for _ in range(count)]
        raise ValueError(f"{self.path}: unknown GGUF value type {kind}")


def read_metadata(path: str | os.PathLike[str], keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Reads the metadata of a little-endian GGUF (version 2 or 3).

    Args:
        path: GGUF file.
        keys: Keys to return (all when ``None``); missing keys are simply absent.

    Returns:
        Values by key: Python scalars, strings and lists.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file is not a GGUF or its metadata is malformed.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such GGUF file: {path}")
    wanted = None if keys is None else set(keys)
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < 24:
            raise ValueError(f"{path} is not a GGUF file")
        # Mapped, not read: only the metadata pages at the start are touched.
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            cur = _Cursor(data, path)
            if cur.take(4) != _MAGIC:
                raise ValueError(f"{path} is not a GGUF file")
            version = cur.scalar("I")
            if version not in _SUPPORTED_VERSIONS:
                raise ValueError(f"{path}: unsupported GGUF version {version}")
            cur.scalar("Q")  # tensor count
            out: dict[str, Any] = {}
            for _ in range(cur.scalar("Q")):
                key = cur.string()
                value = cur.value(cur.scalar("I"))
                if wanted is None or key in wanted:
                    out[key] = value
    return out
