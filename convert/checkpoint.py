"""Read-only, lazy access to the tensors of a Hugging Face safetensors checkpoint.

The safetensors file format is a little-endian u64 header length, a JSON header mapping each
tensor name to ``{"dtype", "shape", "data_offsets"}`` (offsets relative to the end of the
header), then the raw data. The header is parsed here directly and tensors are memory-mapped
one at a time, because numpy has no bfloat16 and the real checkpoint may store BF16; a tensor
is only read (and widened to float32) when asked for, so converting a multi-gigabyte model
never holds more than one source tensor in memory.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Checkpoint", "TensorEntry", "fold_weight_norm", "read_json"]

# safetensors dtype -> (numpy dtype of the stored bytes, bytes per element)
_DTYPES: dict[str, tuple[np.dtype, int]] = {
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),
    "F64": (np.dtype("<f8"), 8),
    "I64": (np.dtype("<i8"), 8),
    "I32": (np.dtype("<i4"), 4),
    "BOOL": (np.dtype("u1"), 1),
    "U8": (np.dtype("u1"), 1),
}


def read_json(path: Path) -> dict:
    """Loads a JSON object from ``path``.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not valid JSON or not an object.
    """
    if not path.is_file():
        raise FileNotFoundError(f"missing file {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives: file, dtype, shape and absolute byte offset."""

    file: Path
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


class Checkpoint:
    """The tensors of ``model.safetensors`` or of a sharded ``model-*-of-*.safetensors`` set.

    Args:
        directory: a directory holding ``model.safetensors`` or ``model.safetensors.index.json``
            with its shards.

    Raises:
        FileNotFoundError: neither file (or a shard named by the index) exists.
        ValueError: a file is not a valid safetensors file.
    """

    def __init__(self, directory: Path) -> None:
        directory = Path(directory)
        single = directory / "model.safetensors"
        index = directory / "model.safetensors.index.json"
        if single.is_file():
            files = [single]
        elif index.is_file():
            weight_map = read_json(index).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise ValueError(f"{index}: missing or empty 'weight_map'")
            files = [directory / name for name in sorted(set(weight_map.values()))]
        else:
            raise FileNotFoundError(f"missing file {single} (or {index.name} with its shards)")
        self.directory = directory
        self._entries: dict[str, TensorEntry] = {}
        for file in files:
            self._entries.update(_read_header(file))

    @classmethod
    def from_file(cls, file: Path) -> Checkpoint:
        """The tensors of one safetensors file of any name (Sopro keeps one per stage).

        Raises:
            FileNotFoundError: the file does not exist.
            ValueError: it is not a valid safetensors file.
        """
        ckpt = cls.__new__(cls)
        ckpt.directory = Path(file).parent
        ckpt._entries = _read_header(Path(file))
        return ckpt

    def names(self) -> list[str]:
        """Every tensor name, in file order."""
        return list(self._entries)

    def entry(self, name: str) -> TensorEntry:
        """The location of tensor ``name``.

        Raises:
            ValueError: the checkpoint has no such tensor.
        """
        if name not in self._entries:
            raise ValueError(f"{self.directory}: missing tensor {name}")
        return self._entries[name]

    def shape(self, name: str) -> tuple[int, ...]:
        """The PyTorch shape of tensor ``name``."""
        return self.entry(name).shape

    def read(self, name: str) -> np.ndarray:
        """Tensor ``name`` as float32 (F16/BF16/F64 widened or narrowed), in PyTorch order."""
        e = self.entry(name)
        stored, _ = _DTYPES[e.dtype]
        count = int(np.prod(e.shape, dtype=np.int64))
        raw = np.fromfile(e.file, dtype=stored, count=count, offset=e.offset)
        if raw.size != count:
            raise ValueError(f"{e.file}: tensor {name} is truncated")
        if e.dtype == "BF16":
            # bfloat16 is the upper half of a float32: shift the bits into place.
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        return raw.astype(np.float32, copy=False).reshape(e.shape)

    def weight_keys(self, name: str) -> list[str] | None:
        """The checkpoint keys holding weight ``name``, or None when it is absent.

        ``prefix.weight`` may be stored as itself, as the weight-norm pair ``prefix.
        parametrizations.weight.original0/1`` (g, v) or as ``prefix.weight_g/weight_v``.
        """
        if name in self._entries:
            return [name]
        if name.endswith(".weight"):
            prefix = name[: -len(".weight")]
            for g, v in (
                (f"{prefix}.parametrizations.weight.original0", f"{prefix}.parametrizations.weight.original1"),
                (f"{prefix}.weight_g", f"{prefix}.weight_v"),
            ):
                if g in self._entries and v in self._entries:
                    return [g, v]
        return None

    def resolve(self, name: str) -> tuple[tuple[int, ...], Callable[[], np.ndarray], list[str]]:
        """Finds weight ``name`` as stored or as a weight-norm pair to fold (see ``weight_keys``).

        Returns:
            The PyTorch shape, a function reading the (folded) float32 values, and the
            checkpoint keys used.

        Raises:
            ValueError: the weight is absent.
        """
        keys = self.weight_keys(name)
        if keys is None:
            raise ValueError(f"{self.directory}: missing tensor {name}")
        if len(keys) == 1:
            return self.shape(name), lambda: self.read(name), keys
        g, v = keys
        return self.shape(v), lambda: fold_weight_norm(self.read(g), self.read(v)), keys


def fold_weight_norm(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Folds a weight-norm pair into the plain weight: ``w = g * v / ||v||``.

    The norm runs over every axis where ``g`` has size 1 (PyTorch's ``weight_norm(dim=d)``
    stores ``g`` with the size of ``v`` on axis ``d`` only), so the same code serves ``dim=0``
    (the default) and HuBERT's positional conv (``dim=2``).

    Raises:
        ValueError: ``g`` does not broadcast against ``v`` that way.
    """
    if g.ndim != v.ndim or any(gs not in (1, vs) for gs, vs in zip(g.shape, v.shape)):
        raise ValueError(f"weight norm: g of shape {g.shape} does not match v of shape {v.shape}")
    axes = tuple(i for i, n in enumerate(g.shape) if n == 1)
    v64 = v.astype(np.float64)
    norm = np.sqrt(np.sum(v64 * v64, axis=axes, keepdims=True))
    return (g.astype(np.float64) * v64 / norm).astype(np.float32)


def _read_header(file: Path) -> dict[str, TensorEntry]:
    if not file.is_file():
        raise FileNotFoundError(f"missing file {file}")
    size = file.stat().st_size
    with open(file, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{file}: not a safetensors file (too short)")
        (header_len,) = struct.unpack("<Q", head)
        if header_len > size - 8:
            raise ValueError(f"{file}: not a safetensors file (header length {header_len} past the end)")
        try:
            header = json.loads(f.read(header_len))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{file}: not a safetensors file ({e})") from e
    data_start = 8 + header_len
    entries: dict[str, TensorEntry] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info.get("dtype")
        if dtype not in _DTYPES:
            raise ValueError(f"{file}: tensor {name} has unsupported dtype {dtype}")
        shape = tuple(int(n) for n in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
        nbytes = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype][1]
        if end - begin != nbytes or data_start + end > size:
            raise ValueError(f"{file}: tensor {name} has inconsistent data offsets or is truncated")
        entries[name] = TensorEntry(file, dtype, shape, data_start + begin, nbytes)
    return entries
