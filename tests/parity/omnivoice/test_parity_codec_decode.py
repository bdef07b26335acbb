"""Codec decode vs the upstream reference (tests/data/fixtures/codec_decode.npz, F32)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from omnivoice import _core
from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer, load_codes, save_codes

FIXTURE = Path(__file__).parents[2] / "data" / "fixtures" / "codec_decode.npz"

# F32 throughout; the reference runs PyTorch's F32 kernels, so differences are rounding only.
AUDIO_ATOL = 1e-4
HIDDEN_ATOL = 1e-5
F16_AUDIO_ATOL = 1e-2
N_BLOCKS = 5


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return dict(f)


def test_hparams(tok: AudioTokenizer) -> None:
    assert (tok.sample_rate, tok.hop_length, tok.frame_rate) == (24000, 960, 25)
    assert (tok.n_codebooks, tok.codebook_size) == (8, 1024)
    assert tok.metadata["general.architecture"] == "omnivoice-tokenizer"


def test_decode_matches_reference(tok: AudioTokenizer, core: _core.Codec, ref: dict[str, np.ndarray]) -> None:
    codes = ref["codes"]
    names = ["rvq.sum", "fc2.out", "dec.conv1.out"] + [f"dec.blk{i}.res3.out" for i in range(N_BLOCKS)]
    got = _core.testing.decode_capture(core, codes, names)

    # ggml [C, T] arrives as numpy (T, C); the fixture is PyTorch's (C, T) except fc2_out (T, C).
    np.testing.assert_allclose(got["rvq.sum"].T, ref["rvq_sum"], rtol=0, atol=HIDDEN_ATOL)
    np.testing.assert_allclose(got["fc2.out"], ref["fc2_out"], rtol=0, atol=HIDDEN_ATOL)
    np.testing.assert_allclose(got["dec.conv1.out"].T, ref["dec_conv1_out"], rtol=0, atol=HIDDEN_ATOL)
    for i in range(N_BLOCKS):
        want = ref[f"dec_block{i}_out"]
        np.testing.assert_allclose(got[f"dec.blk{i}.res3.out"].T, want, rtol=0, atol=AUDIO_ATOL, err_msg=f"block {i}")

    audio = tok.decode(codes)
    assert audio.dtype == np.float32
    assert audio.shape == (codes.shape[1] * 960,)
    np.testing.assert_allclose(audio, ref["audio"], rtol=0, atol=AUDIO_ATOL)
    np.testing.assert_allclose(got["audio"], ref["audio"], rtol=0, atol=AUDIO_ATOL)
    if not core.stock_ops:
        np.testing.assert_array_equal(audio, got["audio"])


def test_fused_snake_matches_composed(core: _core.Codec, ref: dict[str, np.ndarray]) -> None:
    if core.stock_ops:
        pytest.skip("stock ops always compose Snake")
    assert core.fused_snake
    fused = core.decode(ref["codes"])
    core.fused_snake = False
    try:
        composed = core.decode(ref["codes"])
    finally:
        core.fused_snake = True
    np.testing.assert_allclose(composed, ref["audio"], rtol=0, atol=AUDIO_ATOL)
    np.testing.assert_allclose(fused, composed, rtol=0, atol=AUDIO_ATOL)


def test_decode_only_file(tiny_gguf, ref: dict[str, np.ndarray]) -> None:
    path = tiny_gguf("codec", "F32", encoder=False)
    tok = AudioTokenizer.from_file(path, n_threads=1)
    assert not tok.has_encoder
    np.testing.assert_allclose(tok.decode(ref["codes"]), ref["audio"], rtol=0, atol=AUDIO_ATOL)


def test_thread_counts_agree(tiny_codec_gguf: Path, ref: dict[str, np.ndarray]) -> None:
    # Every output is computed whole by one thread, so the split changes no rounding.
    one = AudioTokenizer.from_file(tiny_codec_gguf, n_threads=1).decode(ref["codes"])
    two = AudioTokenizer.from_file(tiny_codec_gguf, n_threads=2).decode(ref["codes"])
    np.testing.assert_array_equal(one, two)


def test_code_dtypes_and_layouts(tok: AudioTokenizer, ref: dict[str, np.ndarray]) -> None:
    codes = ref["codes"]
    want = tok.decode(codes[:, ::2])
    for variant in (codes.astype(np.int64)[:, ::2], codes.astype(np.uint16)[:, ::2], codes[:, ::2].tolist()):
        np.testing.assert_array_equal(tok.decode(variant), want)


def test_lengths(tok: AudioTokenizer, ref: dict[str, np.ndarray]) -> None:
    for n_frames in (1, 2, 5):
        assert tok.decode(ref["codes"][:, :n_frames]).shape == (n_frames * 960,)


@pytest.mark.parametrize(
    ("codes", "match"),
    [
        (np.full((8, 4), 1024), "outside"),
        (np.full((8, 4), -1), "outside"),
        (np.full((8, 4), 2**40), "outside"),
        (np.zeros((7, 4), np.int32), "shape"),
        (np.zeros((8,), np.int32), "shape"),
        (np.zeros((8, 4, 1), np.int32), "shape"),
        (np.zeros((8, 0), np.int32), "shape"),
        (np.zeros((8, 4), np.float32), "integer"),
    ],
)
def test_bad_codes(tok: AudioTokenizer, codes: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tok.decode(codes)


def test_unknown_capture(core: _core.Codec, ref: dict[str, np.ndarray]) -> None:
    with pytest.raises(ValueError, match="no capturable"):
        _core.testing.decode_capture(core, ref["codes"], ["no.such.tensor"])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        AudioTokenizer.from_file(tmp_path / "absent.gguf")


def test_codes_file_roundtrip(tmp_path: Path, ref: dict[str, np.ndarray]) -> None:
    path = tmp_path / "a.ovrq"
    save_codes(path, ref["codes"].astype(np.int64))
    raw = path.read_bytes()
    assert raw[:4] == b"OVRQ"
    assert struct.unpack_from("<5I", raw, 4) == (1, 8, 12, 24000, 25)
    back = load_codes(path)
    assert back.dtype == np.int32
    np.testing.assert_array_equal(back, ref["codes"])


def test_codes_file_errors(tmp_path: Path, ref: dict[str, np.ndarray]) -> None:
    path = tmp_path / "a.ovrq"
    save_codes(path, ref["codes"])
    raw = path.read_bytes()
    cases = {
        "bad_magic.ovrq": (b"XXXX" + raw[4:], "not a codes file"),
        "truncated.ovrq": (raw[:-4], "bytes, expected"),
        "version.ovrq": (raw[:4] + struct.pack("<I", 99) + raw[8:], "version 99"),
        "empty.ovrq": (b"", "not a codes file"),
    }
    for name, (data, match) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=match):
            load_codes(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        load_codes(tmp_path / "absent.ovrq")
    with pytest.raises(ValueError, match="integer"):
        save_codes(tmp_path / "f.ovrq", np.zeros((8, 2), np.float32))


def test_f16_weights(tiny_gguf, ref: dict[str, np.ndarray]) -> None:
    path = tiny_gguf("codec", "F16")
    audio = AudioTokenizer.from_file(path, n_threads=1).decode(ref["codes"])
    # F16 weights round each weight to 11 significant bits: about 0.5% of the signal here.
    np.testing.assert_allclose(audio, ref["audio"], rtol=0, atol=F16_AUDIO_ATOL)


def test_windowed_decode_equals_one_graph(core: _core.Codec) -> None:
    # Long code sequences decode in windows overlapping by the decoder's context (13 frames):
    # every output sample is computed from the same inputs by the same ops as in one graph, so
    # the audio is identical (measured bit-exact on both op paths), and the compute buffer
    # stays that of one window whatever the length.
    codes = np.random.default_rng(3).integers(0, 1024, (8, 160)).astype(np.int32)
    assert core.decode_context == 13
    window = core.decode_window
    try:
        core.decode_window = 0
        whole = core.decode(codes)
        core.decode_window = 2 * core.decode_context + 7  # 17 core frames: ten windows
        core.decode(codes[:, :80])
        size = core.compute_buffer_size
        windowed = core.decode(codes)
        assert core.compute_buffer_size == size
        with pytest.raises(ValueError, match="decode_window"):
            core.decode_window = 2 * core.decode_context
    finally:
        core.decode_window = window
    np.testing.assert_array_equal(windowed, whole)
