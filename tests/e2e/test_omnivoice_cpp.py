"""omnivoice.cpp's GGUF files load in omnivoice and give what ours give.

Their files are rebuilt here from ours as their architecture document describes
(tests/e2e/cpp_layout.py). Expected values: generation from our own files of the tiny checkpoint
(greedy, F32) and upstream's tokenizer ids (tests/data/fixtures/prompts.*); for the K-quants, the
F32 logits of a small random checkpoint whose rows are multiples of 256.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
from fnmatch import fnmatch
from pathlib import Path
from typing import Callable

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from omnivoice import ModelFormatError, OmniVoice, _core
from omnivoice.convert import convert_lm
from omnivoice.convert.__main__ import main as convert_main
from omnivoice.convert.omnivoice.lm import LMHparams
from omnivoice.convert.config import Config
from omnivoice.convert.omnivoice.omnivoice_cpp import convert_cpp_codec, is_cpp_codec
from omnivoice.model_files import resolve_model
from omnivoice.models.omnivoice.tokenizer import TextTokenizer

DATA = Path(__file__).parents[1] / "data"
# The helpers that build omnivoice.cpp-layout files (tests/ is not a package).
_spec = importlib.util.spec_from_file_location("cpp_layout", Path(__file__).parent / "cpp_layout.py")
cpp_layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpp_layout)
def read_metadata(path: Path) -> dict:
    return {k: f.contents() for k, f in gguf.GGUFReader(path).fields.items() if not k.startswith("GGUF.")}


GREEDY = {"num_step": 4, "position_temperature": 0.0, "class_temperature": 0.0}


@pytest.fixture(scope="module")
def cpp_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Their F32 LM (from their converter) and Q8_0 LM (from their quantize tool) and their
    codec, in one directory."""
    out = tmp_path_factory.mktemp("cpp")
    lm, codec = "omnivoice-base-F32.gguf", "omnivoice-tokenizer-F32.gguf"
    cpp_layout.write_cpp_lm(tiny_model_dir / lm, out / lm, None)
    cpp_layout.write_cpp_lm(tiny_model_dir / lm, out / "omnivoice-base-Q8_0.gguf", "Q8_0",
                            qtype=lambda name, shape: "q8_0")
    cpp_layout.write_cpp_codec(tiny_model_dir / codec, out / codec)
    return out


@pytest.fixture()
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("OMNIVOICE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _ref_audio() -> tuple[np.ndarray, int]:
    t = np.arange(24000) / 24000
    return (0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32), 24000


def test_their_files_generate_what_ours_generate(tiny_model_dir: Path, cpp_dir: Path, cache: Path) -> None:
    ours = OmniVoice.from_pretrained(tiny_model_dir / "omnivoice-base-F32.gguf", n_threads=1)
    theirs = OmniVoice.from_pretrained(cpp_dir / "omnivoice-base-F32.gguf", n_threads=1)
    assert theirs.lm.audio_codebook_weights == ours.lm.audio_codebook_weights == [8, 8, 6, 6, 4, 4, 2, 2]
    for kwargs in ({"language": "en"}, {"ref_audio": _ref_audio(), "ref_text": "A reference."}):
        want = ours.generate("Hello from the other port.", seed=3, **kwargs, **GREEDY)[0]
        got = theirs.generate("Hello from the other port.", seed=3, **kwargs, **GREEDY)[0]
        assert want.size > 0 and np.isfinite(want).all()
        np.testing.assert_array_equal(got, want)


def test_their_quantised_lm_equals_ours(tiny_gguf: Callable[..., Path], cpp_dir: Path) -> None:
    backend = _core.Backend(1)
    ours = _core.LM(str(tiny_gguf("lm", "Q8_0")), backend)
    theirs = _core.LM(str(cpp_dir / "omnivoice-base-Q8_0.gguf"), backend)
    assert theirs.metadata["general.file_type"] == "Q8_0"
    ids = np.random.default_rng(0).integers(0, 1024, (8, 40)).astype(np.int32)
    mask = np.arange(40) >= 10
    segments = [(40, 20, 20)]
    np.testing.assert_array_equal(theirs.session(segments).forward(ids, mask),
                                  ours.session(segments).forward(ids, mask))


def test_tokenizer_without_token_types_gives_upstream_ids(cpp_dir: Path) -> None:
    md = read_metadata(cpp_dir / "omnivoice-base-F32.gguf")
    assert "tokenizer.ggml.token_type" not in md
    tok = TextTokenizer.from_metadata(md)
    corpus = json.loads((DATA / "fixtures" / "prompts.json").read_text())["tokenizer_corpus"]
    with np.load(DATA / "fixtures" / "prompts.npz") as fx:
        ids, offsets = fx["tokenizer_ids"], fx["tokenizer_offsets"]
    assert len(corpus) > 5
    for i, text in enumerate(corpus):
        assert tok.encode(text) == ids[offsets[i] : offsets[i + 1]].tolist(), text
    assert tok.encode("<|denoise|><think>") == [2282, 2280]


def test_codec_conversion_restores_our_layout(tiny_model_dir: Path, cpp_dir: Path, tmp_path: Path) -> None:
    theirs = cpp_dir / "omnivoice-tokenizer-F32.gguf"
    ours = tiny_model_dir / "omnivoice-tokenizer-F32.gguf"
    assert is_cpp_codec(theirs) and not is_cpp_codec(ours)
    out = tmp_path / "converted.gguf"
    convert_cpp_codec(theirs, out)
    # The derived keys equal what our converter read from config.json.
    converted = read_metadata(out)
    assert converted.pop("general.name") == "OmniVoice-tokenizer"
    assert converted == read_metadata(ours)
    a = {t.name: t for t in gguf.GGUFReader(out).tensors}  # in their order (sorted by name)
    b = {t.name: t for t in gguf.GGUFReader(ours).tensors}
    assert sorted(a) == sorted(b)
    for name, t in a.items():
        assert t.tensor_type == b[name].tensor_type
        np.testing.assert_array_equal(t.data, b[name].data)
    with pytest.raises(ValueError, match="not an omnivoice.cpp codec"):
        convert_cpp_codec(ours, tmp_path / "again.gguf")


def test_convert_cli_from_omnivoice_cpp(cpp_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = cpp_dir / "omnivoice-tokenizer-F32.gguf"
    assert convert_main([str(src), "--from-omnivoice-cpp", "--outdir", str(tmp_path)]) == 0
    assert "hubert." not in capsys.readouterr().err
    _core.Codec(str(tmp_path / src.name), _core.Backend(1))
    assert convert_main([str(src), "--from-omnivoice-cpp", "--outdir", str(cpp_dir)]) == 1
    assert "--outdir must differ" in capsys.readouterr().err


def test_ggml_reason_reaches_the_error(cpp_dir: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    backend = _core.Backend(1)
    # Their codec as it is: HuBERT names of 64 bytes and more.
    with pytest.raises(ModelFormatError, match=r"not a readable GGUF file \(ggml: .*too long"):
        _core.Codec(str(cpp_dir / "omnivoice-tokenizer-F32.gguf"), backend)
    # An alignment that is not a power of two.
    src = tiny_model_dir / "omnivoice-base-F32.gguf"
    data = bytearray(src.read_bytes())
    key = b"general.alignment"
    at = data.index(key) + len(key) + 4  # value type u32, then the value
    data[at : at + 4] = (48).to_bytes(4, "little")
    bad = tmp_path / "bad-alignment.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match=r"ggml: .*alignment"):
        _core.LM(str(bad), backend)


def test_audio_tokenizer_takes_their_codec(cpp_dir: Path, cache: Path, tmp_path: Path) -> None:
    from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer

    tok = AudioTokenizer.from_file(cpp_dir / "omnivoice-tokenizer-F32.gguf", n_threads=1)
    assert tok.sample_rate == 24000 and tok.metadata["omnivoice.n_quantizers"] == 8


def test_directory_of_their_files(cpp_dir: Path, cache: Path) -> None:
    files = resolve_model(cpp_dir, convert_type="F32")
    assert files.lm == cpp_dir / "omnivoice-base-Q8_0.gguf"  # Q8_0 is preferred over F32
    assert files.codec.is_relative_to(cache) and files.codec.name == "omnivoice-tokenizer-F32.gguf"
    assert not is_cpp_codec(files.codec)
    stamp = files.codec.stat().st_mtime_ns
    assert resolve_model(cpp_dir) == files and files.codec.stat().st_mtime_ns == stamp  # converted once
    explicit = resolve_model(cpp_dir / "omnivoice-base-F32.gguf", codec=cpp_dir / "omnivoice-tokenizer-F32.gguf")
    assert explicit.codec == files.codec


def _fake_hub(monkeypatch: pytest.MonkeyPatch, remote: Path, local: Path) -> list[dict]:
    """huggingface_hub stand-in: snapshot_download copies the files of `remote` that the
    patterns select (as the Hub filters them) into `local`, and records each call."""
    calls: list[dict] = []

    def snapshot_download(repo_id: str, allow_patterns=None, ignore_patterns=None) -> str:  # noqa: ANN001
        calls.append({"repo_id": repo_id, "allow": allow_patterns, "ignore": ignore_patterns})
        for f in remote.rglob("*"):
            rel = str(f.relative_to(remote))
            if f.is_dir() or (allow_patterns and not any(fnmatch(rel, p) for p in allow_patterns)):
                continue
            if ignore_patterns and any(fnmatch(rel, p) for p in ignore_patterns):
                continue
            (local / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, local / rel)
        return str(local)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=snapshot_download))
    return calls


def test_hub_repo_of_their_files(cpp_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    local = tmp_path / "hub"
    calls = _fake_hub(monkeypatch, cpp_dir, local)
    files = resolve_model("someone/OmniVoice-GGUF", convert_type="F32")
    assert files.lm == local / "omnivoice-base-F32.gguf"
    assert not (local / "omnivoice-base-Q8_0.gguf").exists()  # only the LM type asked for
    assert files.codec.is_relative_to(cache)
    assert [c["repo_id"] for c in calls] == ["someone/OmniVoice-GGUF"] * 2
    with pytest.raises(FileNotFoundError, match="omnivoice-base-BF16.gguf"):
        resolve_model("someone/OmniVoice-GGUF", convert_type="BF16")


def test_hub_snapshot_is_still_converted(cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = _fake_hub(monkeypatch, DATA / "tiny_hf", tmp_path / "hub")
    files = resolve_model("k2-fsa/OmniVoice", convert_type="F32")
    assert files.lm.name == "omnivoice-base-F32.gguf" and files.lm.is_relative_to(cache)
    assert len(calls) == 1 and calls[0]["ignore"] == ["*.gguf"]


# --- K-quants: rows of 256 ----------------------------------------------------------------------

# Max |quantised - F32| / max |F32| of the logits on the small checkpoint, about 1.3x measured:
# 0.47 (q2_K), 0.25, 0.11, 0.060, 0.031 (q6_K), 0.088 (Q4_K_M); each bit halves it.
K_TOLERANCE = {"q2_K": 0.6, "q3_K": 0.32, "q4_K": 0.14, "q5_K": 0.08, "q6_K": 0.04, "Q4_K_M": 0.12}
# Against the same weights dequantised to F32: ggml rounds the activations to Q8_K for these
# products; measured 1.0e-2 to 1.1e-2 for every type.
DEQUANTISED_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def wide_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random checkpoint shaped like the tiny one but 256 wide (2 heads of 128, 1 KV head, FFN
    512), with the tiny tokenizer (vocab 2304)."""
    src = tmp_path_factory.mktemp("wide_hf")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(DATA / "tiny_hf" / name, src / name)
    cfg = json.loads((DATA / "tiny_hf" / "config.json").read_text())
    cfg["llm_config"].update(hidden_size=256, intermediate_size=512, num_attention_heads=2,
                             num_key_value_heads=1, head_dim=128)
    (src / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(7)
    weights = {}
    for name, shape in LMHparams.from_config(Config.load(src / "config.json")).tensor_shapes().items():
        if len(shape) == 1:
            weights[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:  # linears N(0, 1/fan_in), embeddings N(0, 1): logits O(1)
            std = 1.0 if "embed" in name else shape[1] ** -0.5
            weights[name] = rng.normal(0, std, shape).astype(np.float32)
    save_file(weights, str(src / "model.safetensors"))
    return src


@pytest.fixture(scope="module")
def wide_f32(wide_hf: Path) -> Path:
    return convert_lm(wide_hf, wide_hf / "omnivoice-base-F32.gguf", "F32").path


@pytest.fixture(scope="module")
def wide_logits(wide_f32: Path) -> np.ndarray:
    return _logits(wide_f32)


def _logits(path: Path) -> np.ndarray:
    lm = _core.LM(str(path), _core.Backend(1))
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 1024, (8, 64)).astype(np.int32)
    ids[0, :24] = rng.integers(0, 2289, 24)
    mask = np.arange(64) >= 24
    return lm.session([(64, 24, 40), (40, 0, 40)]).forward(np.concatenate([ids, ids[:, 24:]], 1),
                                                            np.concatenate([mask, mask[24:]]))


@pytest.mark.slow
@pytest.mark.parametrize("ktype", ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "Q4_K_M"])
def test_k_quant_lm_close_to_f32(ktype: str, wide_hf: Path, wide_f32: Path, wide_logits: np.ndarray,
                                 tmp_path: Path) -> None:
    dst = tmp_path / f"omnivoice-base-{ktype}.gguf"
    if ktype == "Q4_K_M":  # our converter's (their quantize tool's mix), then in their layout
        mixed = convert_lm(wide_hf, tmp_path / "ours.gguf", "Q4_K_M")
        # Q6_K: both embedding tables, layer 0's v_proj and down_proj.
        assert mixed.tensor_types == {"F32": 9, "Q4_K": 13, "Q6_K": 4}
        cpp_layout.write_cpp_lm(mixed.path, dst, "Q4_K_M")
    else:  # every 2-D weight of one type
        cpp_layout.write_cpp_lm(wide_f32, dst, ktype.upper(), qtype=lambda name, shape: ktype)
    got = _logits(dst)
    err = float(np.abs(got - wide_logits).max() / np.abs(wide_logits).max())
    # The same weights dequantised to F32: what is left is ggml's Q8_K rounding of the activations.
    dequantised = tmp_path / "dequantised.gguf"
    cpp_layout.write_cpp_lm(dst, dequantised, None, qtype=lambda name, shape: "f32")
    exact = _logits(dequantised)
    err_dq = float(np.abs(got - exact).max() / np.abs(exact).max())
    assert 0 < err <= K_TOLERANCE[ktype]
    assert err_dq <= DEQUANTISED_TOLERANCE
