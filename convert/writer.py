"""Streaming GGUF output: tensors are planned first, then produced and written one at a time."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

__all__ = ["PlannedTensor", "WrittenFile", "write_gguf"]

logger = logging.getLogger(__name__)

# ggml keeps tensor names in a char[64] (GGML_MAX_NAME), terminator included.
MAX_NAME_BYTES = 63
# Tensor data starts on cache lines (`general.alignment`): with gguf's default 32 every weight
# the CPU maps in place sits mid-line, and the LM's BF16 step ran ~4% slower.
DATA_ALIGNMENT = 64
# Types gguf-py cannot quantise (the K-quants): ggml does them.
_GGML_QUANTIZED = {
    gguf.GGMLQuantizationType.Q2_K,
    gguf.GGMLQuantizationType.Q3_K,
    gguf.GGMLQuantizationType.Q4_K,
    gguf.GGMLQuantizationType.Q5_K,
    gguf.GGMLQuantizationType.Q6_K,
}


@dataclass(frozen=True)
class PlannedTensor:
    """One output tensor: its GGUF name, PyTorch shape, storage type and a data source.

    ``load`` returns the float32 values in PyTorch order; it is called only when the tensor is
    written, so at most one tensor's data is alive at a time.
    """

    name: str
    shape: tuple[int, ...]
    qtype: gguf.GGMLQuantizationType
    load: Callable[[], np.ndarray]


@dataclass(frozen=True)
class WrittenFile:
    """Summary of a written GGUF file."""

    path: Path
    n_tensors: int
    n_bytes: int
    n_params: int
    tensor_types: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: path, tensor count, size and the count of tensors per type."""
        types = ", ".join(f"{n} {t}" for t, n in sorted(self.tensor_types.items()))
        return (
            f"{self.path}: {self.n_tensors} tensors ({types}), {self.n_params / 1e6:.1f}M params, "
            f"{self.n_bytes / 2**20:.1f} MiB"
        )


def _encode(t: PlannedTensor) -> np.ndarray:
    data = t.load()
    if data.shape != t.shape:
        raise ValueError(f"tensor {t.name}: got shape {data.shape}, planned {t.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"tensor {t.name}: holds NaN or infinite values")
    if t.qtype in _GGML_QUANTIZED:
        from omnivoice import _core  # ggml's own quantiser, through the package's C++ core

        out = _core.quantize(data.reshape(-1, data.shape[-1]), t.qtype.name)
        out = out.reshape(*data.shape[:-1], out.shape[-1])
    else:
        out = gguf.quants.quantize(data, t.qtype)
    if t.qtype == gguf.GGMLQuantizationType.F16 and not np.all(np.isfinite(out)):
        raise ValueError(f"tensor {t.name}: values exceed the float16 range; convert it as F32")
    return out


def _nbytes(t: PlannedTensor) -> int:
    # gguf-py's byte shape counts bytes on the last axis for every type, F32 and F16 included.
    try:
        byte_shape = gguf.quants.quant_shape_to_byte_shape(t.shape, t.qtype)
    except ValueError as e:
        raise ValueError(f"tensor {t.name} of shape {t.shape} cannot be stored as {t.qtype.name}: {e}") from e
    return int(np.prod(byte_shape, dtype=np.int64))


def write_gguf(writer: gguf.GGUFWriter, tensors: Sequence[PlannedTensor]) -> WrittenFile:
    """Writes the metadata already added to ``writer`` and then ``tensors``, one at a time.

    On any error the partly written file is removed.

    Raises:
        ValueError: a tensor name is too long for ggml, a shape does not fit its type (Q8_0
            rows must be a multiple of 32), or the data is not finite.
    """
    path = Path(writer.path)
    writer.add_custom_alignment(DATA_ALIGNMENT)
    for t in tensors:
        if len(t.name.encode()) > MAX_NAME_BYTES:
            raise ValueError(f"tensor name {t.name!r} is longer than ggml's {MAX_NAME_BYTES} bytes")
        writer.add_tensor_info(t.name, t.shape, np.dtype(np.float32), _nbytes(t), raw_dtype=t.qtype)
    n_params = 0
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in tensors:
            data = _encode(t)
            writer.write_tensor_data(data)
            n_params += int(np.prod(t.shape, dtype=np.int64))
            logger.debug("%s %s %s", t.name, t.shape, t.qtype.name)
        writer.close()
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)
        raise
    types = Counter(t.qtype.name for t in tensors)
    return WrittenFile(path, len(tensors), path.stat().st_size, n_params, dict(types))
