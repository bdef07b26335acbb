"""Codec encode vs the upstream reference (tests/data/fixtures/codec_encode.npz, F32), input
checks, and the omnivoice-codec CLI round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnivoice import _core
from omnivoice.audio import to_mono
from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer, load_codes, save_codes
from omnivoice.codec_cli import main as codec_cli

FIXTURE = Path(__file__).parents[2] / "data" / "fixtures" / "codec_encode.npz"

# F32 on both sides: differences are rounding only. Relative to the reference's largest value.
REL_TOL = 1e-4
N_LAYERS = 2  # tiny HuBERT


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return dict(f)


def test_encode_stages_match_reference(core: _core.Codec, ref: dict[str, np.ndarray]) -> None:
    hidden = ["hubert.hidden0"] + [f"hubert.l{i}.out" for i in range(N_LAYERS)]
    names = ["hubert.conv_out", "hubert.out", "e_semantic", "e_acoustic", "fc.out", *hidden]
    got = _core.testing.encode_capture(core, ref["audio_24k"], ref["audio_16k"], names)

    # ggml [C, T] arrives as numpy (T, C); the fixture's conv outputs are PyTorch's (C, T).
    assert rel_err(got["hubert.conv_out"].T, ref["hubert_conv_out"]) < REL_TOL
    for i, name in enumerate(hidden):
        assert rel_err(got[name], ref["hubert_hidden_states"][i]) < REL_TOL, name
    assert rel_err(got["hubert.out"], ref["hubert_mean"]) < REL_TOL
    assert rel_err(got["e_semantic"].T, ref["semantic_encoder_out"]) < REL_TOL
    assert rel_err(got["e_acoustic"].T, ref["acoustic_encoder_out"]) < REL_TOL
    assert rel_err(got["fc.out"], ref["fc_out"]) < REL_TOL
    np.testing.assert_array_equal(got["codes"], ref["codes"])


def test_core_encode_returns_int32_codes(core: _core.Codec, ref: dict[str, np.ndarray]) -> None:
    codes = core.encode(ref["audio_24k"], ref["audio_16k"])
    assert codes.dtype == np.int32
    np.testing.assert_array_equal(codes, ref["codes"])


def test_audio_tokenizer_encode_matches_reference(tok: AudioTokenizer, ref: dict[str, np.ndarray]) -> None:
    # The 24 kHz -> 16 kHz step must reproduce the reference's input to HuBERT.
    wave16 = to_mono(ref["audio_24k"], 24000, 16000)
    np.testing.assert_allclose(wave16, ref["audio_16k"], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(tok.encode(ref["audio_24k"], 24000), ref["codes"])


def test_encode_accepts_channels_and_int_pcm(tok: AudioTokenizer, ref: dict[str, np.ndarray]) -> None:
    mono = ref["audio_24k"]
    want = tok.encode(mono, 24000)
    # Two identical channels average to the mono signal.
    np.testing.assert_array_equal(tok.encode(np.stack([mono, mono]), 24000), want)
    np.testing.assert_array_equal(tok.encode(mono.astype(np.float64), 24000), want)
    pcm = np.round(mono * 32767).astype(np.int16)
    codes16 = tok.encode(pcm, 24000)
    assert codes16.shape == want.shape
    # int16 quantisation moves the signal by < 2e-5; nearly every code survives.
    assert (codes16 == want).mean() > 0.9


def test_encode_resamples_other_rates(tok: AudioTokenizer, ref: dict[str, np.ndarray]) -> None:
    wave48 = to_mono(ref["audio_24k"], 24000, 48000)
    codes = tok.encode(wave48, 48000)
    assert codes.shape == ref["codes"].shape
    assert codes.dtype == np.int32
    assert codes.min() >= 0 and codes.max() < tok.codebook_size


def test_encode_pads_partial_frames(tok: AudioTokenizer, ref: dict[str, np.ndarray]) -> None:
    # 24500 samples: HuBERT gives 26 frames after downsampling, the unpadded DAC encoder 25, so
    # the reference pads the 24 kHz input by hop/2 on each side and gets 26 (checked upstream).
    longer = np.concatenate([ref["audio_24k"], ref["audio_24k"][:500]])
    codes = tok.encode(longer, 24000)
    assert codes.shape == (8, 26)
    assert codes.min() >= 0 and codes.max() < tok.codebook_size


@pytest.mark.parametrize(
    ("wave", "rate", "match"),
    [
        (np.zeros(0, np.float32), 24000, "empty"),
        (np.zeros(500, np.float32), 24000, "too short"),
        (np.full(24000, np.nan, np.float32), 24000, "NaN"),
        (np.concatenate([np.zeros(23999, np.float32), [np.inf]]).astype(np.float32), 24000, "NaN or infinite"),
        (np.zeros((1, 1, 24000), np.float32), 24000, "dimensions"),
        (np.zeros(24000, np.complex64), 24000, "dtype"),
        (np.zeros(24000, np.bool_), 24000, "dtype"),
        (np.zeros(24000, np.float32), 0, "sample_rate"),
        (np.zeros(24000, np.float32), -16000, "sample_rate"),
    ],
)
def test_encode_rejects_bad_input(tok: AudioTokenizer, wave: np.ndarray, rate: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tok.encode(wave, rate)


def test_core_encode_rejects_bad_input(core: _core.Codec) -> None:
    ok = np.zeros(24000, np.float32)
    ok16 = np.zeros(16000, np.float32)
    with pytest.raises(ValueError, match="1-D"):
        core.encode(ok[None], ok16)
    with pytest.raises(ValueError, match="non-finite"):
        core.encode(ok, np.full(16000, np.nan, np.float32))
    with pytest.raises(ValueError, match="too short"):
        core.encode(ok[:10], ok16[:7])
    with pytest.raises(ValueError, match="cannot align"):
        core.encode(ok, ok16[:8000])


def test_decode_only_file_cannot_encode(tiny_gguf, ref: dict[str, np.ndarray]) -> None:
    path = tiny_gguf("codec", "F32", encoder=False)
    tok = AudioTokenizer.from_file(path, n_threads=1)
    assert not tok.has_encoder
    with pytest.raises(ValueError, match="no encoder"):
        tok.encode(ref["audio_24k"], 24000)
    with pytest.raises(ValueError, match="no encoder"):
        _core.Codec(str(path), _core.Backend(1)).encode(ref["audio_24k"], ref["audio_16k"])


@pytest.mark.slow
def test_f16_codec_encodes_close_to_reference(tiny_gguf, ref: dict[str, np.ndarray]) -> None:
    path = tiny_gguf("codec", "F16")
    codes = AudioTokenizer.from_file(path, n_threads=2).encode(ref["audio_24k"], 24000)
    # F16 weights move the latent by ~1e-3 relative: the first codebooks hold, late residual
    # ones may flip a few entries.
    assert codes.shape == ref["codes"].shape
    np.testing.assert_array_equal(codes[:4], ref["codes"][:4])
    assert (codes == ref["codes"]).mean() > 0.9


@pytest.mark.parametrize(
    ("overrides", "drop", "to_f16", "match"),
    [
        ({"omnivoice.semantic.feat_extract_norm": "layer"}, "", "", "only 'group'"),
        ({"omnivoice.semantic.do_stable_layer_norm": True}, "", "", "post-LN"),
        ({"omnivoice.semantic_encoder.block_dilations": [0, 1]}, "", "", "block_dilations"),
        ({"omnivoice.semantic.num_attention_heads": 5}, "", "", "divide"),
        ({}, "hubert.encoder.layers.1.feed_forward.output_dense.bias", "", "missing tensor"),
        ({}, "quantizer.quantizers.3.project_in.weight", "", "missing tensor"),
        # q/k/v are joined into one matmul: mixed storage types cannot be
        ({}, "", "hubert.encoder.layers.0.attention.k_proj.weight", "share a type"),
    ],
)
def test_bad_encoder_file(
    tiny_codec_gguf: Path,
    tmp_path: Path,
    rewrite_gguf,
    overrides: dict[str, object],
    drop: str,
    to_f16: str,
    match: str,
) -> None:
    path = tmp_path / "bad.gguf"
    rewrite_gguf(tiny_codec_gguf, path, overrides=overrides, drop=drop, to_f16=to_f16)
    with pytest.raises(ValueError, match=match):
        AudioTokenizer.from_file(path, n_threads=1)


@pytest.mark.slow
def test_cli_round_trip(tiny_codec_gguf: Path, tmp_path: Path, ref: dict[str, np.ndarray]) -> None:
    wav = tmp_path / "clip.wav"
    # A 48 kHz float file of the fixture signal plus half a frame the CLI drops.
    wave48 = to_mono(ref["audio_24k"], 24000, 48000)
    sf.write(wav, np.concatenate([wave48, np.zeros(960, np.float32)]), 48000, subtype="FLOAT")
    assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(wav), "--threads", "1"]) == 0
    codes = load_codes(tmp_path / "clip.ovrq")
    assert codes.shape == ref["codes"].shape

    out = tmp_path / "back.wav"
    args = ["--model", str(tiny_codec_gguf), "-i", str(tmp_path / "clip.ovrq"), "-o", str(out), "--format", "wav24"]
    assert codec_cli(args) == 0
    info = sf.info(out)
    assert (info.samplerate, info.channels, info.frames, info.subtype) == (24000, 1, 25 * 960, "PCM_24")


def test_cli_errors_are_one_line(tiny_codec_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "short.wav"
    sf.write(short, np.zeros(100, np.float32), 24000)
    assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(short)]) == 1
    err = capsys.readouterr().err
    assert "shorter than one codec frame" in err and err.count("\n") == 1

    assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(tmp_path / "missing.wav")]) == 1
    assert "not found" in capsys.readouterr().err

    # Decoding short.ovrq by default would write short.wav, the original: refused.
    save_codes(tmp_path / "short.ovrq", np.zeros((8, 2), np.int32))
    assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(tmp_path / "short.ovrq")]) == 1
    assert "exists; give -o" in capsys.readouterr().err

    bad = tmp_path / "bad.ovrq"
    bad.write_bytes(b"OVRQ" + b"\0" * 4)
    assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(bad)]) == 1
    assert "not a codes file" in capsys.readouterr().err
