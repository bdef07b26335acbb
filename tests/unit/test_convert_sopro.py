"""The Sopro converter on the committed tiny checkpoint (tests/data/sopro_tiny, made by sopro 2.2.0's
own classes): every tensor, config field and the tokenizer reach the one GGUF as docs/gguf-layout.md
says, the family is told from config.json, and bad snapshots fail naming the cause.

Expected values are read here from the safetensors and config.json with ``safetensors`` and ``json``;
the GGUF is read back with gguf-py.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file

from omnivoice.convert import detect_family
from omnivoice.convert.__main__ import main as convert_main
from omnivoice.convert.sopro import TOKENIZER_KEY, convert_sopro

TESTS = Path(__file__).parent
TINY = TESTS.parents[0] / "data" / "sopro_tiny"
OMNIVOICE_TINY = TESTS.parents[0] / "data" / "tiny_hf"
Q = gguf.GGMLQuantizationType
STAGES = ("model", "semantic_encoder", "speaker_encoder", "vocoder")

# gguf-py readers and the per-type error bound shared with the OmniVoice converter's tests.
_spec = importlib.util.spec_from_file_location("convert_helpers", TESTS / "test_convert.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

# upstream's quantize_ar_int8 set, per layer and whole-model
INT8_LAYER = ("attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.out_proj.weight",
              "ffn.gate_proj.weight", "ffn.up_proj.weight", "ffn.down_proj.weight")
INT8_MODEL = ("sem_in_proj.weight", "ar_prior.token_head.weight")
KEPT_F32 = ("frontend.mel.mel_scale.fb", "frontend.mel.spectrogram.window",
              "feature_extractor.mel_spec.mel_scale.fb", "feature_extractor.mel_spec.spectrogram.window",
              "head.istft.window", "style_prefix.queries", "pos_emb")


def source_tensors() -> dict[str, np.ndarray]:
    """``<stage>.<key>`` -> the checkpoint's values, LayerScale folded as the layout says."""
    out = {}
    for stage in STAGES:
        sd = load_file(str(TINY / f"{stage}.safetensors"))
        for key, value in sd.items():
            if key.endswith(("attn_scale.scale", "ffn_scale.scale")):
                continue
            if key.endswith("attn.out_proj.weight") and key.startswith("ar_prior."):
                value = value * sd[key.replace("attn.out_proj.weight", "attn_scale.scale")][:, None]
            if key.endswith("ffn.down_proj.weight"):
                value = value * sd[key.replace("ffn.down_proj.weight", "ffn_scale.scale")][:, None]
            out[f"{stage}.{key}"] = value
    return out


def expected_type(outtype: str, name: str, shape: tuple[int, ...]) -> Q:
    stage, key = name.split(".", 1)
    if len(shape) < 2 or key in KEPT_F32 or outtype == "F32":
        return Q.F32
    if outtype == "F16":
        return Q.F16
    int8 = stage == "model" and (key in INT8_MODEL or key.startswith("ar_prior.temporal.") and key.endswith(INT8_LAYER))
    return Q.Q8_0 if int8 else Q.F32


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("sopro")
    return {t: (convert_sopro(TINY, out / f"{t}.gguf", t), out / f"{t}.gguf") for t in ("F32", "F16", "Q8_0")}


@pytest.mark.parametrize("outtype", ["F32", "F16", "Q8_0"])
def test_every_tensor(converted, outtype):
    written, path = converted[outtype]
    got = helpers.read_gguf_tensors(path)
    want = source_tensors()
    assert sorted(got) == sorted(want) and written.n_tensors == len(want)
    n_q8 = 0
    for name, value in want.items():
        qtype, stored = got[name]
        assert qtype == expected_type(outtype, name, value.shape), name
        helpers.assert_stored(name, qtype, stored, value.astype(np.float64))
        n_q8 += qtype == Q.Q8_0
    n_blocks = json.loads((TINY / "config.json").read_text())["model"]["ar_blocks"]
    assert n_q8 == (7 * n_blocks + 2 if outtype == "Q8_0" else 0)


def test_metadata(converted):
    md = helpers.read_gguf_metadata(converted["Q8_0"][1])
    cfg = json.loads((TINY / "config.json").read_text())
    assert md["general.architecture"] == "sopro-tts"
    assert md["general.file_type"] == int(gguf.LlamaFileType.MOSTLY_Q8_0)
    assert md["sopro-tts.sample_rate"] == cfg["sample_rate"]
    for section in ("model", "semantic_encoder", "speaker_encoder", "vocoder", "generation"):
        for field, value in cfg[section].items():
            if value is None:  # resolved, checked below
                continue
            got = md[f"sopro-tts.{section}.{field}"]
            if isinstance(value, (float, list)) and not isinstance(value, bool):
                np.testing.assert_allclose(np.asarray(got, dtype=np.float64), value, rtol=1e-7, err_msg=field)
            else:
                assert got == value, field
    m = cfg["model"]
    assert md["sopro-tts.model.ar_kv_heads"] == m["ar_heads"]  # null in config.json
    assert md["sopro-tts.model.acoustic_mu_dim"] == m["acoustic_mel_n_mels"]
    assert md["sopro-tts.model.ar_ffn_length"] == round(m["ar_ffn_mult"] * m["ar_model_dim"])
    assert md["sopro-tts.model.acoustic_dit_ff_length"] == round(m["acoustic_dit_ff_mult"] * m["acoustic_dit_dim"])
    assert bytes(md[TOKENIZER_KEY]) == (TINY / "tokenizer.model").read_bytes()


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY, tmp_path / "src"))


def _edit(src: Path, edit) -> None:
    data = json.loads((src / "config.json").read_text())
    edit(data)
    (src / "config.json").write_text(json.dumps(data))


def test_defaults_as_upstream(tmp_path):
    # A field config.json omits takes sopro 2.2.0's default (SoproConfig.from_dict); nulls resolve.
    src = _copy(tmp_path)
    _edit(src, lambda d: (d["generation"].pop("ref_seconds"), d["vocoder"].update(block_lookaheads=None)))
    convert_sopro(src, tmp_path / "out.gguf")
    md = helpers.read_gguf_metadata(tmp_path / "out.gguf")
    assert md["sopro-tts.generation.ref_seconds"] == 15.0
    assert md["sopro-tts.vocoder.block_lookaheads"] == [0] * json.loads((TINY / "config.json").read_text())["vocoder"]["num_layers"]


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d["model"].pop("acoustic_mel_mean"), "acoustic_mel_mean is required"),
        (lambda d: d["model"].update(acoustic_mel_std=[1.0]), "acoustic_mel_std has 1 values"),
        (lambda d: d["model"].update(ar_heads="4"), "model.ar_heads must be a non-negative integer"),
        (lambda d: d["model"].update(ar_blocks=2), "unexpected tensor ar_prior.temporal.layers.2"),
        (lambda d: d["model"].update(ar_blocks=4), "missing tensor ar_prior.temporal.layers.3"),
        (lambda d: d["model"].update(ar_ffn_mult=3.0), "ffn.gate_proj.weight has shape"),
        (lambda d: d["model"].update(semantic_vocab_size=17), "product of semantic_encoder.fsq_levels"),
        (lambda d: d["generation"].update(max_seconds=float("nan")), "max_seconds must be a finite number"),
    ],
)
def test_bad_config(tmp_path, edit, match):
    src = _copy(tmp_path)
    _edit(src, edit)
    with pytest.raises(ValueError, match=match):
        convert_sopro(src, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_missing_file_and_type(tmp_path):
    src = _copy(tmp_path)
    (src / "vocoder.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="vocoder.safetensors"):
        convert_sopro(src, tmp_path / "out.gguf")
    with pytest.raises(ValueError, match="F32, F16, Q8_0"):
        convert_sopro(TINY, tmp_path / "out.gguf", "BF16")


def test_family_from_config(tmp_path):
    assert detect_family(TINY) == "sopro"
    assert detect_family(OMNIVOICE_TINY) == "omnivoice"
    (tmp_path / "config.json").write_text(json.dumps({"model": {}, "vocoder": {}}))
    with pytest.raises(ValueError, match="not a known family"):
        detect_family(tmp_path)


def test_cli(tmp_path, capsys):
    assert convert_main([str(TINY), "--outdir", str(tmp_path), "--outtype", "F16"]) == 0
    out = capsys.readouterr().out
    assert "a Sopro V2 Turbo snapshot" in out and "sopro-v2-turbo-F16.gguf" in out
    assert (tmp_path / "sopro-v2-turbo-F16.gguf").is_file()
    assert convert_main([str(TINY), "--outdir", str(tmp_path), "--outtype", "BF16"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not available for Sopro" in err[0]
