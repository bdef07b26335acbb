"""The fast GGUF metadata reader against gguf-py's GGUFReader."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from omnivoice.gguf_meta import read_metadata


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("meta") / "sample.gguf"
    w = gguf.GGUFWriter(str(path), "omnivoice-lm")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool", True)
    w.add_uint64("t.u64", 2**60)
    w.add_int64("t.i64", -(2**60))
    w.add_float64("t.f64", 1e-300)
    w.add_string("t.str", "héllo ✓")
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, 8.0, 6.25])
    w.add_array("t.strs", ["a", "", "Ġb c", "<|text_start|>"])
    w.add_tensor("x", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_matches_gguf_reader(sample: Path) -> None:
    ours = read_metadata(sample)
    reader = gguf.GGUFReader(str(sample))
    expected = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        assert ours[key] == value, key


def test_selected_keys(sample: Path) -> None:
    assert read_metadata(sample, ["t.str", "t.ints", "no.such.key"]) == {"t.str": "héllo ✓", "t.ints": [1, -2, 3]}


def test_bad_files(sample: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_metadata(tmp_path / "missing.gguf")
    not_gguf = tmp_path / "not.gguf"
    not_gguf.write_bytes(b"GGML" + bytes(40))
    with pytest.raises(ValueError, match="not a GGUF"):
        read_metadata(not_gguf)
    data = sample.read_bytes()
    end_of_meta = data.index(b"<|text_start|>") + len("<|text_start|>")
    for cut in (30, 100, end_of_meta - 3):
        truncated = tmp_path / f"cut{cut}.gguf"
        truncated.write_bytes(data[:cut])
        with pytest.raises(ValueError, match="truncated"):
            read_metadata(truncated)
