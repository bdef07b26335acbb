"""Typed access to a Hugging Face ``config.json`` that names the field it misses."""

from __future__ import annotations

from pathlib import Path

from .checkpoint import read_json

__all__ = ["Config"]


class Config:
    """A JSON config object, or a nested part of one.

    Args:
        data: the parsed JSON object.
        where: how to name this object in errors, e.g. ``"model/config.json"`` or
            ``"model/config.json: llm_config"``.
    """

    def __init__(self, data: dict, where: str) -> None:
        self._data = data
        self._where = where

    @classmethod
    def load(cls, path: Path) -> Config:
        """Reads ``path``; raises FileNotFoundError when it does not exist."""
        return cls(read_json(path), str(path))

    def _get(self, key: str) -> object:
        if key not in self._data or self._data[key] is None:
            raise ValueError(f"{self._where}: missing config field {key!r}")
        return self._data[key]

    def _bad(self, key: str, what: str) -> ValueError:
        return ValueError(f"{self._where}: config field {key!r} must be {what}, got {self._data[key]!r}")

    def has(self, key: str) -> bool:
        """Whether ``key`` is present and not null."""
        return self._data.get(key) is not None

    def get_int(self, key: str) -> int:
        """A non-negative integer field."""
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self._bad(key, "a non-negative integer")
        return v

    def get_float(self, key: str) -> float:
        """A number field."""
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._bad(key, "a number")
        return float(v)

    def get_bool(self, key: str) -> bool:
        """A boolean field."""
        v = self._get(key)
        if not isinstance(v, bool):
            raise self._bad(key, "true or false")
        return v

    def get_str(self, key: str) -> str:
        """A string field."""
        v = self._get(key)
        if not isinstance(v, str):
            raise self._bad(key, "a string")
        return v

    def get_ints(self, key: str) -> list[int]:
        """A non-empty list of integers (whole floats such as ``1.0`` accepted)."""
        v = self._get(key)
        if not isinstance(v, list) or not v or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and float(x).is_integer() for x in v
        ):
            raise self._bad(key, "a non-empty list of integers")
        return [int(x) for x in v]

    def get_floats(self, key: str) -> list[float]:
        """A non-empty list of numbers."""
        v = self._get(key)
        if not isinstance(v, list) or not v or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v
        ):
            raise self._bad(key, "a non-empty list of numbers")
        return [float(x) for x in v]

    def sub(self, key: str) -> Config:
        """A nested object field."""
        v = self._get(key)
        if not isinstance(v, dict):
            raise self._bad(key, "an object")
        return Config(v, f"{self._where}: {key}")
