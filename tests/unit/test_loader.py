"""The C++ GGUF loader's generic checks: a truncated file, a file of another arch, and a file
missing a tensor (or with a misshaped or unexpected one) raise omnivoice.ModelFormatError."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

import omnivoice
from omnivoice import _core

@pytest.fixture(scope="module")
def files(tiny_gguf, tiny_codec_gguf) -> tuple[Path, Path]:
    return tiny_gguf("lm", "Q8_0"), tiny_codec_gguf


@pytest.fixture(scope="module")
def backend() -> omnivoice.Backend:
    return omnivoice.Backend(1)


def ggml_shapes(path: Path) -> dict[str, list[int]]:
    """{name: ggml shape} of every tensor, read with gguf-py."""
    return {t.name: [int(n) for n in t.shape] for t in gguf.GGUFReader(path).tensors}


def test_converted_files_pass(files, backend):
    for path, arch in zip(files, ("omnivoice-lm", "omnivoice-tokenizer")):
        metadata, tensors = _core.testing.read_gguf(str(path), arch, backend)
        assert metadata["general.architecture"] == arch
        shapes = ggml_shapes(path)
        assert set(tensors) == set(shapes)
        _core.testing.check_gguf(str(path), arch, backend, shapes)


@pytest.mark.parametrize("keep", [0.0, 0.3, 0.999])
def test_truncated(files, backend, tmp_path, keep):
    # keep=0 is an empty file, 0.3 cuts the LM's tensor data, 0.999 drops its last bytes.
    data = files[0].read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(omnivoice.ModelFormatError, match="cut.gguf: (truncated|not a readable GGUF)"):
        _core.testing.read_gguf(str(cut), "omnivoice-lm", backend)


def test_truncated_header(files, backend, tmp_path):
    # Cut inside the metadata (the vocabulary arrays are in the first part of the file).
    data = files[0].read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:4096])
    with pytest.raises(omnivoice.ModelFormatError, match="not a readable GGUF"):
        _core.testing.read_gguf(str(cut), "omnivoice-lm", backend)


def test_not_a_gguf(backend, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGML" + bytes(range(256)) * 8)
    with pytest.raises(omnivoice.ModelFormatError, match="not a readable GGUF"):
        _core.testing.read_gguf(str(junk), "omnivoice-lm", backend)
    with pytest.raises(omnivoice.ModelFormatError, match="no such file"):
        _core.testing.read_gguf(str(tmp_path / "absent.gguf"), "omnivoice-lm", backend)
    with pytest.raises(omnivoice.ModelFormatError, match="not a regular file"):
        _core.testing.read_gguf(str(tmp_path), "omnivoice-lm", backend)


def test_wrong_arch(files, backend):
    lm, codec = files
    with pytest.raises(omnivoice.ModelFormatError, match="architecture is 'omnivoice-lm', expected 'omnivoice-tokenizer'"):
        _core.testing.read_gguf(str(lm), "omnivoice-tokenizer", backend)
    with pytest.raises(omnivoice.ModelFormatError, match="architecture is 'omnivoice-tokenizer'"):
        _core.testing.check_gguf(str(codec), "omnivoice-lm", backend, ggml_shapes(codec))


def test_model_format_error_is_value_error():
    assert issubclass(omnivoice.ModelFormatError, ValueError)


def test_missing_model_file_is_file_not_found(backend, tmp_path):
    # FileNotFoundError, as for every missing file, and still a ModelFormatError.
    for load in (lambda p: _core.LM(p, backend), lambda p: _core.Codec(p, backend)):
        with pytest.raises(FileNotFoundError, match="absent.gguf: no such file") as err:
            load(str(tmp_path / "absent.gguf"))
        assert isinstance(err.value, omnivoice.ModelFormatError)


@pytest.mark.slow
@pytest.mark.parametrize("drop", ["llm.layers.1.self_attn.k_norm.weight", "audio_heads.weight"])
def test_missing_tensor(files, backend, tmp_path, drop, rewrite_gguf):
    lm = files[0]
    smaller = tmp_path / "smaller.gguf"
    rewrite_gguf(lm, smaller, drop=drop)
    assert set(ggml_shapes(smaller)) == set(ggml_shapes(lm)) - {drop}
    # The rewritten file itself is a valid GGUF: only the tensor is missing.
    _core.testing.read_gguf(str(smaller), "omnivoice-lm", backend)
    with pytest.raises(omnivoice.ModelFormatError, match=f"missing tensor {drop}"):
        _core.testing.check_gguf(str(smaller), "omnivoice-lm", backend, ggml_shapes(lm))


def test_missing_codec_tensor(files, backend, tmp_path, rewrite_gguf):
    codec = files[1]
    drop = "hubert.encoder.pos_conv_embed.conv.weight"
    smaller = tmp_path / "smaller.gguf"
    rewrite_gguf(codec, smaller, drop=drop)
    with pytest.raises(omnivoice.ModelFormatError, match=f"missing tensor {drop}"):
        _core.testing.check_gguf(str(smaller), "omnivoice-tokenizer", backend, ggml_shapes(codec))


def test_misshaped_tensor(files, backend):
    lm = files[0]
    shapes = ggml_shapes(lm)
    name = "llm.layers.0.mlp.down_proj.weight"
    n_in, n_out = shapes[name]
    shapes[name] = [n_out, n_in]
    with pytest.raises(
        omnivoice.ModelFormatError, match=rf"tensor {name} has shape \[{n_in}, {n_out}\], expected \[{n_out}, {n_in}\]"
    ):
        _core.testing.check_gguf(str(lm), "omnivoice-lm", backend, shapes)
    shapes[name] = [n_in, n_out, 1, 2]
    with pytest.raises(omnivoice.ModelFormatError, match=f"tensor {name} has shape"):
        _core.testing.check_gguf(str(lm), "omnivoice-lm", backend, shapes)


def test_unexpected_tensor(files, backend):
    lm = files[0]
    shapes = ggml_shapes(lm)
    del shapes["llm.norm.weight"]
    with pytest.raises(omnivoice.ModelFormatError, match="unexpected tensor llm.norm.weight"):
        _core.testing.check_gguf(str(lm), "omnivoice-lm", backend, shapes)
