"""Resolution of the ``model`` argument to the two GGUF files."""

from pathlib import Path

import pytest

from omnivoice.model_files import resolve_model


def _touch(p: Path) -> Path:
    p.write_bytes(b"")
    return p


def test_directory_prefers_bf16_and_finds_codec(tmp_path: Path) -> None:
    for t in ("F32", "BF16", "Q8_0"):
        _touch(tmp_path / f"omnivoice-base-{t}.gguf")
    codec = _touch(tmp_path / "omnivoice-tokenizer-F32.gguf")
    files = resolve_model(tmp_path)
    assert files.lm == tmp_path / "omnivoice-base-BF16.gguf"
    assert files.codec == codec


def test_lm_file_finds_codec_beside_it(tmp_path: Path) -> None:
    lm = _touch(tmp_path / "omnivoice-base-F32.gguf")
    _touch(tmp_path / "omnivoice-base-BF16.gguf")
    codec = _touch(tmp_path / "omnivoice-tokenizer-F16.gguf")
    files = resolve_model(lm)
    assert (files.lm, files.codec) == (lm, codec)


def test_explicit_codec_wins(tmp_path: Path) -> None:
    lm = _touch(tmp_path / "omnivoice-base-F32.gguf")
    other = tmp_path / "elsewhere"
    other.mkdir()
    codec = _touch(other / "my-codec.gguf")
    assert resolve_model(lm, codec=codec).codec == codec


@pytest.mark.parametrize("setup, message", [
    (lambda d: _touch(d / "omnivoice-base-F32.gguf"), "no tokenizer GGUF"),
    (lambda d: _touch(d / "readme.txt"), "neither omnivoice GGUF files nor a Hugging Face snapshot"),
])
def test_incomplete_directory_names_what_is_missing(tmp_path: Path, setup, message: str) -> None:
    setup(tmp_path)
    with pytest.raises(FileNotFoundError, match=message):
        resolve_model(tmp_path)


def test_missing_path_and_non_gguf_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="model not found"):
        resolve_model(tmp_path / "nope" / "x.gguf")
    with pytest.raises(FileNotFoundError, match="not a .gguf file"):
        resolve_model(_touch(tmp_path / "model.bin"))


def test_hub_id_offline_gives_a_readable_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Without huggingface_hub (or without network) the message says what to pass instead.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, "huggingface_hub", None)
    with pytest.raises(FileNotFoundError, match="GGUF"):
        resolve_model("k2-fsa/OmniVoice")


def test_snapshot_is_converted_once_into_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    snapshot = Path(__file__).parents[1] / "data" / "tiny_hf"
    monkeypatch.setenv("OMNIVOICE_CACHE", str(tmp_path / "cache"))
    files = resolve_model(snapshot)
    assert files.lm.name == "omnivoice-base-BF16.gguf" and files.lm.is_file()
    assert files.codec.name == "omnivoice-tokenizer-F32.gguf" and files.codec.is_file()
    assert files.lm.parent.is_relative_to(tmp_path / "cache")
    stamp = files.lm.stat().st_mtime_ns
    again = resolve_model(snapshot)
    assert again == files and files.lm.stat().st_mtime_ns == stamp  # not converted twice
