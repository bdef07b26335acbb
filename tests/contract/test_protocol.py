"""Every registered family's tiny model through the shared protocol (omnivoice.protocol).

A new family adds one entry to FAMILIES below: its family name and the fixture of its tiny model
(a GGUF file or directory that ``omnivoice.load`` takes), plus a reference clip it can clone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import omnivoice
from omnivoice import registry
from omnivoice.protocol import MODES, OptionError, SpeechModel, UnsupportedMode, WrongFamily

# (family, fixture giving the path of its tiny model). Sopro and MOSS join here when their classes land.
FAMILIES = [("omnivoice", "tiny_model_dir")]
# Few steps: the contract is about shapes, refusals and round trips, not quality.
FAST = {"omnivoice": {"num_step": 2}}
TEXT = "Hello there. This is a test."


@pytest.fixture(scope="module", params=FAMILIES, ids=[f for f, _ in FAMILIES])
def family_model(request: pytest.FixtureRequest) -> tuple[str, SpeechModel, dict]:
    family, fixture = request.param
    return family, omnivoice.load(request.getfixturevalue(fixture), n_threads=1), FAST.get(family, {})


def _reference(model: SpeechModel) -> tuple[np.ndarray, int]:
    # 1.5 s of a voiced, harmonic signal: enough for any family's encoder to take.
    t = np.arange(int(1.5 * model.sampling_rate)) / model.sampling_rate
    wave = 0.3 * np.sin(2 * np.pi * 140 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return wave.astype(np.float32), model.sampling_rate


def _check_audio(audio: np.ndarray) -> None:
    assert audio.dtype == np.float32 and audio.ndim == 1 and audio.size > 0
    assert np.isfinite(audio).all()
    assert np.abs(audio).max() > 1e-4  # silence passed off as speech fails here


def test_loads_by_path_as_its_family(family_model):
    family, model, _ = family_model
    assert isinstance(model, SpeechModel)
    assert model.family == family == model.capabilities.family
    assert isinstance(model.sampling_rate, int) and model.sampling_rate > 0


def test_capabilities_are_consistent(family_model):
    _, model, _ = family_model
    caps = model.capabilities
    assert set(caps.modes) <= set(MODES)
    assert (caps.instruct is None) == ("design" not in caps.modes)
    assert caps.languages is None or (caps.languages and all(isinstance(c, str) for c in caps.languages))
    for mode in MODES:
        voice = object() if mode == "clone" else None
        instruct = "female" if mode == "design" else None
        if mode in caps.modes:
            assert caps.check_mode(voice, None, instruct) == mode
        else:
            with pytest.raises(UnsupportedMode, match=caps.family):
                caps.check_mode(voice, None, instruct)


def test_check_request_refuses_by_name_before_work(family_model):
    _, model, fast = family_model
    assert model.check_request(text=TEXT, **fast)["language"] is None
    with pytest.raises(TypeError, match="no_such_option"):
        model.check_request(text=TEXT, no_such_option=1)
    if model.capabilities.languages is not None:
        with pytest.raises(OptionError, match="language") as err:
            model.check_request(text=TEXT, language="no-such-language")
        assert err.value.argument == "language"
        model.check_request(text=TEXT, language=model.capabilities.languages[0])
    if model.capabilities.clone_needs_transcript:
        with pytest.raises(OptionError) as err:
            model.check_request(text=TEXT, ref_audio=_reference(model))
        assert err.value.argument == "ref_text"


def test_voice_round_trip_and_other_family_refused(family_model, tmp_path: Path):
    family, model, fast = family_model
    if "clone" not in model.capabilities.modes:
        pytest.skip(f"{family} does not clone")
    voice = model.create_voice(_reference(model), "A short reference clip.")
    assert voice.family == family
    voice.save(tmp_path / "v.npz")
    again = model.load_voice(tmp_path / "v.npz")
    assert type(again) is type(voice) and again.family == family
    assert registry.load_voice(tmp_path / "v.npz").family == family
    (audio,) = model.generate(TEXT, voice=again, seed=0, **fast)
    _check_audio(audio)

    # The same file claiming another family is refused by this one, naming both.
    with np.load(tmp_path / "v.npz") as z:
        fields = {k: z[k] for k in z.files}
    np.savez(tmp_path / "other.npz", **{**fields, "family": np.array("not-" + family)})
    with pytest.raises(WrongFamily, match=f"not-{family}.*{family}"):
        model.load_voice(tmp_path / "other.npz")
    with pytest.raises(ValueError, match=f"not-{family}"):
        registry.load_voice(tmp_path / "other.npz")


def test_generate_and_stream(family_model):
    _, model, fast = family_model
    caps = model.capabilities
    kwargs = dict(fast)
    if "auto" not in caps.modes:
        kwargs["voice"] = model.create_voice(_reference(model), "A short reference clip.")
    (audio,) = model.generate(TEXT, seed=0, **kwargs)
    _check_audio(audio)
    chunks = list(model.generate_stream(TEXT, seed=0, **kwargs))
    assert [c.index for c in chunks] == list(range(len(chunks)))
    _check_audio(np.concatenate([c.audio for c in chunks]))
    assert model.speech_seconds(TEXT) > model.speech_seconds("Hi.") > 0
    tokens_in, tokens_out = model.token_usage(TEXT, audio.size / model.sampling_rate)
    assert tokens_in > 0 and tokens_out > 0
    assert model.batch_key({**kwargs, "seed": 3}) is None  # a fixed seed never batches


def test_unknown_architecture_names_the_known_ones(tmp_path: Path):
    import gguf

    path = tmp_path / "x.gguf"
    writer = gguf.GGUFWriter(path, "not-a-family")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert registry.read_architecture(path) == "not-a-family"
    with pytest.raises(omnivoice.ModelFormatError, match="'omnivoice-lm'"):
        omnivoice.load(path)


def test_other_familys_gguf_refused_by_omnivoice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import gguf

    path = tmp_path / "other.gguf"
    writer = gguf.GGUFWriter(path, "other-tts")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    monkeypatch.setitem(registry.FAMILIES, "other-tts", registry.Family("othertts", "no.such:Module"))
    with pytest.raises(omnivoice.ModelFormatError, match=r"othertts model, not omnivoice: load it with omnivoice.load"):
        omnivoice.OmniVoice.from_pretrained(path)
