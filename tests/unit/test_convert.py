"""The converter on the committed tiny checkpoint: every kept tensor, metadata and vocabulary
reach the GGUF files as docs/gguf-layout.md says, and bad snapshots fail with a named cause.

Expected values come from the checkpoint itself, read here with ``safetensors`` and ``json``
independently of the converter; stored GGUF values are read back (and dequantised) with gguf-py.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import omnivoice
from omnivoice import _core
from omnivoice.convert import convert_codec, convert_lm, convert_model
from omnivoice.convert.__main__ import main as convert_main

TINY = Path(__file__).parents[1] / "data" / "tiny_hf"
Q = gguf.GGMLQuantizationType

# (LM --outtype, --codec-type): every LM type once, both codec types.
TYPES = [("F32", "F32"), ("F16", "F16"), ("BF16", "F32"), ("Q8_0", "F32")]

CODEC_ENCODER_PREFIXES = ("hubert.", "encoder_semantic.", "acoustic_encoder.", "fc.")
OMNIVOICE_TOKENS = {
    "denoise": "<|denoise|>",
    "lang_start": "<|lang_start|>",
    "lang_end": "<|lang_end|>",
    "instruct_start": "<|instruct_start|>",
    "instruct_end": "<|instruct_end|>",
    "text_start": "<|text_start|>",
    "text_end": "<|text_end|>",
}


def read_gguf_tensors(path: Path) -> dict[str, tuple[Q, np.ndarray]]:
    """{name: (type, float32 values in PyTorch order)} read and dequantised with gguf-py."""
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = (t.tensor_type, values.reshape(tuple(int(n) for n in reversed(t.shape))))
    return out


def read_gguf_metadata(path: Path) -> dict[str, object]:
    """{key: value} of every metadata field, read with gguf-py."""
    return {name: f.contents() for name, f in gguf.GGUFReader(path).fields.items() if not name.startswith("GGUF.")}


def assert_stored(name: str, qtype: Q, got: np.ndarray, want: np.ndarray) -> None:
    """``got`` (dequantised) equals ``want`` within what storing it as ``qtype`` may lose."""
    assert got.shape == want.shape, name
    err = np.abs(got.astype(np.float64) - want)
    if qtype == Q.F32:
        np.testing.assert_array_equal(got, want, err_msg=name)
    elif qtype in (Q.F16, Q.BF16):
        # Round to nearest: half an ulp, 11 (F16) or 8 (BF16) significant bits; F16 subnormals absolute.
        bits = 11 if qtype == Q.F16 else 8
        floor = 2.0**-25 if qtype == Q.F16 else 0.0
        assert np.all(err <= np.abs(want) * 2.0**-bits + floor), f"{name}: max err {err.max()}"
    elif qtype == Q.Q8_0:
        # Blocks of 32 along a row share scale d = max|x| / 127 (stored as F16): half a step plus
        # the scale's own rounding on the largest code.
        blocks = np.abs(want).reshape(-1, 32).max(axis=1, keepdims=True)
        bound = blocks * (0.5 / 127 + 2.0**-11) * (1 + 1e-5) + 1e-12
        assert np.all(err.reshape(-1, 32) <= bound), f"{name}: max err {err.max()}"
    else:
        raise AssertionError(f"{name}: unexpected type {qtype.name}")


def fold_reference(g: np.ndarray, v: np.ndarray, dim: int) -> np.ndarray:
    """torch.nn.utils.weight_norm's weight: g * v / ||v||, norm over every axis but ``dim``."""
    axes = tuple(i for i in range(v.ndim) if i != dim)
    v64 = v.astype(np.float64)
    return g * v64 / np.sqrt(np.sum(v64**2, axis=axes, keepdims=True))


def expected_codec(ckpt: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], set[str]]:
    """The codec tensors the layout keeps, under their GGUF names, from the raw checkpoint, and
    the names of those folded from a weight-norm pair (exact only to float32 rounding)."""
    out, folded = {}, set()
    for name, value in ckpt.items():
        if name.startswith(("fc1.", "decoder_semantic.")) or name.rsplit(".", 1)[-1] in (
            "inited",
            "cluster_size",
            "embed_avg",
        ):
            continue
        if ".parametrizations.weight.original" in name:
            if name.endswith("original0"):
                prefix = name[: -len(".parametrizations.weight.original0")]
                v = ckpt[prefix + ".parametrizations.weight.original1"]
                dim = [i for i, n in enumerate(value.shape) if n != 1][0]
                out[prefix + ".weight"] = fold_reference(value, v, dim)
                folded.add(prefix + ".weight")
            continue
        out[name] = value

    def rename(n: str) -> str:
        return "hubert." + n[len("semantic_model.") :] if n.startswith("semantic_model.") else n

    return {rename(n): v for n, v in out.items()}, {rename(n) for n in folded}


@pytest.fixture(scope="module")
def tiny_lm() -> dict[str, np.ndarray]:
    return load_file(TINY / "model.safetensors")


@pytest.fixture(scope="module")
def tiny_codec() -> dict[str, np.ndarray]:
    return load_file(TINY / "audio_tokenizer" / "model.safetensors")


@pytest.fixture(scope="module", params=TYPES, ids=[f"lm{a}-codec{b}" for a, b in TYPES])
def converted(request, tmp_path_factory) -> tuple[str, str, Path, Path]:
    outtype, codec_type = request.param
    out = tmp_path_factory.mktemp(f"conv_{outtype}")
    result = convert_model(TINY, out, outtype=outtype, codec_type=codec_type)
    assert result.lm.path == out / f"omnivoice-base-{outtype}.gguf"
    assert result.codec.path == out / f"omnivoice-tokenizer-{codec_type}.gguf"
    return outtype, codec_type, result.lm.path, result.codec.path


@pytest.fixture(scope="module")
def backend() -> omnivoice.Backend:
    return omnivoice.Backend(1)


def test_lm_tensors(converted, tiny_lm):
    outtype, _, lm_path, _ = converted
    stored = read_gguf_tensors(lm_path)
    want = {n: v for n, v in tiny_lm.items() if n != "codebook_layer_offsets"}
    assert set(stored) == set(want)
    for name, value in want.items():
        qtype, got = stored[name]
        assert qtype == (Q[outtype] if value.ndim == 2 else Q.F32), name
        assert_stored(name, qtype, got, value)


def test_codec_tensors(converted, tiny_codec):
    _, codec_type, _, codec_path = converted
    stored = read_gguf_tensors(codec_path)
    want, folded = expected_codec(tiny_codec)
    assert set(stored) == set(want)
    assert folded == {"hubert.encoder.pos_conv_embed.conv.weight"}
    for name, value in want.items():
        qtype, got = stored[name]
        is_weight = name.endswith(".weight") and value.ndim >= 2
        assert qtype == (Q[codec_type] if is_weight else Q.F32), name
        if name in folded:
            np.testing.assert_allclose(got, value, rtol=2.0**-11 if qtype == Q.F16 else 1e-6, atol=1e-7)
        else:
            assert_stored(name, qtype, got, value)


def test_pos_conv_weight_norm_folded(tmp_path, tiny_codec):
    prefix = "semantic_model.encoder.pos_conv_embed.conv.parametrizations.weight."
    g, v = tiny_codec[prefix + "original0"], tiny_codec[prefix + "original1"]
    assert g.shape == (1, 1, v.shape[2])  # HuBERT's weight_norm(dim=2)
    written = convert_codec(TINY / "audio_tokenizer", tmp_path / "c.gguf")
    _, got = read_gguf_tensors(written.path)["hubert.encoder.pos_conv_embed.conv.weight"]
    norm = np.sqrt((v.astype(np.float64) ** 2).sum(axis=(0, 1), keepdims=True))
    np.testing.assert_allclose(got, g * v / norm, rtol=1e-6, atol=1e-7)


def test_weight_g_weight_v_folded(tmp_path, tiny_codec):
    # An older checkpoint style: weight_g / weight_v with dim=0 on a decoder conv.
    ckpt = dict(tiny_codec)
    name = "acoustic_decoder.block.0.res_unit1.conv1"
    rng = np.random.default_rng(0)
    v = ckpt.pop(name + ".weight") * rng.uniform(0.5, 2.0, size=(1, 1, 7)).astype(np.float32)
    g = rng.uniform(0.1, 1.0, size=(v.shape[0], 1, 1)).astype(np.float32)
    ckpt[name + ".weight_g"], ckpt[name + ".weight_v"] = g, v
    src = tmp_path / "codec"
    src.mkdir()
    shutil.copy(TINY / "audio_tokenizer" / "config.json", src / "config.json")
    save_file(ckpt, src / "model.safetensors")
    written = convert_codec(src, tmp_path / "c.gguf")
    _, got = read_gguf_tensors(written.path)[name + ".weight"]
    np.testing.assert_allclose(got, fold_reference(g, v, 0), rtol=1e-6, atol=1e-7)


def test_lm_metadata(converted, backend):
    outtype, _, lm_path, _ = converted
    cfg = json.loads((TINY / "config.json").read_text())
    llm = cfg["llm_config"]
    tok = json.loads((TINY / "tokenizer.json").read_text())
    added = {a["content"]: a["id"] for a in tok["added_tokens"]}
    tok_cfg = json.loads((TINY / "tokenizer_config.json").read_text())
    file_type = {"F32": 0, "F16": 1, "Q8_0": 7, "BF16": 32}[outtype]
    want = {
        "general.architecture": "omnivoice-lm",
        "general.alignment": 64,
        "general.file_type": file_type,
        "omnivoice-lm.block_count": llm["num_hidden_layers"],
        "omnivoice-lm.embedding_length": llm["hidden_size"],
        "omnivoice-lm.feed_forward_length": llm["intermediate_size"],
        "omnivoice-lm.attention.head_count": llm["num_attention_heads"],
        "omnivoice-lm.attention.head_count_kv": llm["num_key_value_heads"],
        "omnivoice-lm.attention.key_length": llm["head_dim"],
        "omnivoice-lm.attention.value_length": llm["head_dim"],
        "omnivoice-lm.context_length": llm["max_position_embeddings"],
        "omnivoice-lm.vocab_size": llm["vocab_size"],
        "omnivoice.tie_word_embeddings": llm["tie_word_embeddings"],
        "omnivoice.num_audio_codebook": cfg["num_audio_codebook"],
        "omnivoice.audio_vocab_size": cfg["audio_vocab_size"],
        "omnivoice.audio_mask_id": cfg["audio_mask_id"],
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.eos_token_id": added[tok_cfg["eos_token"]],
        "tokenizer.ggml.padding_token_id": added[tok_cfg["pad_token"]],
        **{f"omnivoice.special.{k}": added[v] for k, v in OMNIVOICE_TOKENS.items()},
    }
    floats = {
        "omnivoice-lm.attention.layer_norm_rms_epsilon": llm["rms_norm_eps"],
        "omnivoice-lm.rope.freq_base": llm["rope_parameters"]["rope_theta"],
    }
    core_md, core_tensors = _core.testing.read_gguf(str(lm_path), "omnivoice-lm", backend)
    for md in (read_gguf_metadata(lm_path), core_md):
        for key, value in want.items():
            assert md[key] == value, key
        for key, value in floats.items():
            assert md[key] == pytest.approx(value, rel=1e-7), key
        assert md["omnivoice.audio_codebook_weights"] == [float(w) for w in cfg["audio_codebook_weights"]]
    assert len(core_tensors) == len(gguf.GGUFReader(lm_path).tensors)


def test_tokenizer_arrays(converted):
    _, _, lm_path, _ = converted
    tok = json.loads((TINY / "tokenizer.json").read_text())
    by_id = {i: s for s, i in tok["model"]["vocab"].items()}
    types = dict.fromkeys(by_id, 1)
    for a in tok["added_tokens"]:
        by_id[a["id"]] = a["content"]
        types[a["id"]] = 3 if a["special"] else 4
    md = read_gguf_metadata(lm_path)
    assert md["tokenizer.ggml.tokens"] == [by_id[i] for i in range(len(by_id))]
    assert md["tokenizer.ggml.token_type"] == [types[i] for i in range(len(by_id))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    assert md["tokenizer.ggml.merges"] == merges


def test_codec_metadata(converted, backend):
    _, codec_type, _, codec_path = converted
    cfg = json.loads((TINY / "audio_tokenizer" / "config.json").read_text())
    ac, sc = cfg["acoustic_model_config"], cfg["semantic_model_config"]
    hop = math.prod(ac["downsampling_ratios"])
    n_quantizers = len({n.split(".")[2] for n in load_file(TINY / "audio_tokenizer" / "model.safetensors")
                        if n.startswith("quantizer.quantizers.")})
    want = {
        "general.architecture": "omnivoice-tokenizer",
        "general.alignment": 64,
        "general.file_type": {"F32": 0, "F16": 1}[codec_type],
        "omnivoice.sample_rate": cfg["sample_rate"],
        "omnivoice.semantic_sample_rate": cfg["semantic_sample_rate"],
        "omnivoice.downsample_factor": cfg["downsample_factor"],
        "omnivoice.codebook_size": cfg["codebook_size"],
        "omnivoice.codebook_dim": cfg["codebook_dim"],
        "omnivoice.n_quantizers": n_quantizers,
        "omnivoice.frame_rate": cfg["sample_rate"] // hop,
        "omnivoice.has_encoder": True,
        "omnivoice.acoustic.encoder_hidden_size": ac["encoder_hidden_size"],
        "omnivoice.acoustic.decoder_hidden_size": ac["decoder_hidden_size"],
        "omnivoice.acoustic.hidden_size": ac["hidden_size"],
        "omnivoice.acoustic.hop_length": hop,
        "omnivoice.acoustic.upsampling_ratios": ac["upsampling_ratios"],
        "omnivoice.acoustic.downsampling_ratios": ac["downsampling_ratios"],
        "omnivoice.semantic.hidden_size": sc["hidden_size"],
        "omnivoice.semantic.intermediate_size": sc["intermediate_size"],
        "omnivoice.semantic.num_attention_heads": sc["num_attention_heads"],
        "omnivoice.semantic.num_hidden_layers": sc["num_hidden_layers"],
        "omnivoice.semantic.conv_dim": sc["conv_dim"],
        "omnivoice.semantic.conv_kernel": sc["conv_kernel"],
        "omnivoice.semantic.conv_stride": sc["conv_stride"],
        "omnivoice.semantic.conv_bias": sc["conv_bias"],
        "omnivoice.semantic.num_conv_pos_embeddings": sc["num_conv_pos_embeddings"],
        "omnivoice.semantic.num_conv_pos_embedding_groups": sc["num_conv_pos_embedding_groups"],
        "omnivoice.semantic.feat_extract_norm": sc["feat_extract_norm"],
        "omnivoice.semantic.feat_proj_layer_norm": sc["feat_proj_layer_norm"],
        "omnivoice.semantic.do_stable_layer_norm": sc["do_stable_layer_norm"],
        # 960-sample hop at 24 kHz is 640 samples at 16 kHz, two HuBERT frames of 320.
        "omnivoice.semantic.downsample_factor": hop * cfg["semantic_sample_rate"] // cfg["sample_rate"]
        // cfg["downsample_factor"],
        "omnivoice.semantic_encoder.kernel_size": cfg["kernel_size"],
        "omnivoice.semantic_encoder.unit_kernel_size": cfg["unit_kernel_size"],
        "omnivoice.semantic_encoder.strides": cfg["strides"],
        "omnivoice.semantic_encoder.block_dilations": cfg["block_dilations"],
        "omnivoice.semantic_encoder.channel_ratios": cfg["channel_ratios"],
    }
    core_md, _ = _core.testing.read_gguf(str(codec_path), "omnivoice-tokenizer", backend)
    for md in (read_gguf_metadata(codec_path), core_md):
        for key, value in want.items():
            assert md[key] == value, key
        assert md["omnivoice.semantic.layer_norm_eps"] == pytest.approx(sc["layer_norm_eps"], rel=1e-7)
        assert set(md) == set(want) | {"omnivoice.semantic.layer_norm_eps"}


def test_no_encoder_drops_exactly_the_encoder(tmp_path):
    full = read_gguf_tensors(convert_codec(TINY / "audio_tokenizer", tmp_path / "full.gguf").path)
    dec_path = convert_codec(TINY / "audio_tokenizer", tmp_path / "dec.gguf", encoder=False).path
    dec = read_gguf_tensors(dec_path)
    dropped = set(full) - set(dec)
    assert set(dec) <= set(full)
    assert dropped == {n for n in full if n.startswith(CODEC_ENCODER_PREFIXES) or ".project_in." in n}
    assert any(n.startswith("hubert.") for n in dropped)
    for name, (_, value) in dec.items():
        np.testing.assert_array_equal(value, full[name][1])
    assert read_gguf_metadata(dec_path)["omnivoice.has_encoder"] is False


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """A safetensors file by hand, for the dtypes numpy cannot hold (BF16): {name: (dtype, raw)}."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, raw) in tensors.items():
        data = raw.tobytes()
        header[name] = {"dtype": dtype, "shape": list(raw.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_bf16_f16_sharded_source(tmp_path, tiny_lm):
    # Sources stored as BF16 and F16 in two shards with an index: read and widened exactly.
    src = tmp_path / "src"
    shutil.copytree(TINY, src, ignore=shutil.ignore_patterns("model.safetensors", "audio_tokenizer"))
    rounded, shards, weight_map = {}, [{}, {}], {}
    for i, (name, value) in enumerate(tiny_lm.items()):
        if value.dtype != np.float32:
            entry = ("I64", value)
        elif i % 2:
            entry = ("F16", value.astype(np.float16))
            rounded[name] = entry[1].astype(np.float32)
        else:
            bits = gguf.quants.quantize(value, Q.BF16).view(np.uint16).reshape(value.shape)
            entry = ("BF16", bits)
            rounded[name] = (bits.astype(np.uint32) << 16).view(np.float32)
        shard = i % 2
        shards[shard][name] = entry
        weight_map[name] = f"model-0000{shard + 1}-of-00002.safetensors"
    for k, shard in enumerate(shards):
        _write_safetensors(src / f"model-0000{k + 1}-of-00002.safetensors", shard)
    (src / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    stored = read_gguf_tensors(convert_lm(src, tmp_path / "lm.gguf").path)
    assert set(stored) == set(rounded)
    for name, value in rounded.items():
        np.testing.assert_array_equal(stored[name][1], value, err_msg=name)


def _copy_tiny(dst: Path) -> Path:
    shutil.copytree(TINY, dst)
    return dst


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "relpath",
    ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors",
     "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors"],
)
def test_missing_file(tmp_path, relpath):
    src = _copy_tiny(tmp_path / "src")
    (src / relpath).unlink()
    with pytest.raises(FileNotFoundError, match=Path(relpath).name):
        convert_model(src, tmp_path / "out")


@pytest.mark.parametrize(
    "relpath, field",
    [("config.json", "num_hidden_layers"), ("config.json", "audio_vocab_size"),
     ("audio_tokenizer/config.json", "codebook_dim"), ("audio_tokenizer/config.json", "conv_kernel")],
)
def test_missing_config_field(tmp_path, relpath, field):
    src = _copy_tiny(tmp_path / "src")

    def drop(cfg: dict) -> None:
        for obj in (cfg, cfg.get("llm_config", {}), cfg.get("semantic_model_config", {})):
            obj.pop(field, None)

    _edit_json(src / relpath, drop)
    with pytest.raises(ValueError, match=f"missing config field '{field}'"):
        convert_model(src, tmp_path / "out")


@pytest.mark.parametrize(
    "subdir, name",
    [("", "llm.layers.1.mlp.down_proj.weight"), ("", "audio_heads.weight"),
     ("audio_tokenizer", "acoustic_decoder.block.2.conv_t1.weight"),
     ("audio_tokenizer", "semantic_model.encoder.layers.0.attention.q_proj.bias"),
     ("audio_tokenizer", "semantic_model.encoder.pos_conv_embed.conv.parametrizations.weight.original0")],
)
def test_missing_tensor(tmp_path, subdir, name):
    src = _copy_tiny(tmp_path / "src")
    ckpt = load_file(src / subdir / "model.safetensors")
    del ckpt[name]
    save_file(ckpt, src / subdir / "model.safetensors")
    wanted = name.replace(".parametrizations.weight.original0", ".weight")
    with pytest.raises(ValueError, match=f"missing tensor {wanted}"):
        convert_model(src, tmp_path / "out")


def test_unexpected_and_misshaped_tensor(tmp_path, tiny_lm):
    src = _copy_tiny(tmp_path / "src")
    save_file({**tiny_lm, "llm.layers.0.extra.weight": np.zeros(4, np.float32)}, src / "model.safetensors")
    with pytest.raises(ValueError, match="unexpected tensor llm.layers.0.extra.weight"):
        convert_lm(src, tmp_path / "a.gguf")
    bad = {**tiny_lm, "llm.norm.weight": np.zeros(3, np.float32)}
    save_file(bad, src / "model.safetensors")
    with pytest.raises(ValueError, match=r"tensor llm.norm.weight has shape \[3\]"):
        convert_lm(src, tmp_path / "b.gguf")
    assert not (tmp_path / "a.gguf").exists() and not (tmp_path / "b.gguf").exists()


def test_non_finite_weight_rejected(tmp_path, tiny_lm):
    src = _copy_tiny(tmp_path / "src")
    bad = dict(tiny_lm)
    bad["llm.norm.weight"] = bad["llm.norm.weight"].copy()
    bad["llm.norm.weight"][0] = np.nan
    save_file(bad, src / "model.safetensors")
    with pytest.raises(ValueError, match="llm.norm.weight: holds NaN"):
        convert_lm(src, tmp_path / "lm.gguf")
    assert not (tmp_path / "lm.gguf").exists()


def test_unknown_type(tmp_path):
    with pytest.raises(ValueError, match="Q4_0"):
        convert_model(TINY, tmp_path, outtype="Q4_0")
    with pytest.raises(ValueError, match="BF16"):
        convert_model(TINY, tmp_path, codec_type="BF16")


def test_cli(tmp_path, capsys):
    assert convert_main([str(TINY), "--outdir", str(tmp_path), "--outtype", "Q8_0", "--no-encoder"]) == 0
    out = capsys.readouterr().out
    n_layer = json.loads((TINY / "config.json").read_text())["llm_config"]["num_hidden_layers"]
    # 11 per layer, plus embed_tokens, norm, audio_embeddings, audio_heads
    assert f"omnivoice-base-Q8_0.gguf: {11 * n_layer + 4} tensors" in out and "omnivoice-tokenizer-F32.gguf" in out
    assert read_gguf_metadata(tmp_path / "omnivoice-tokenizer-F32.gguf")["omnivoice.has_encoder"] is False

    assert convert_main([str(tmp_path / "nowhere"), "--outdir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing model directory" in err[0]

    # A GGUF given where the snapshot goes: say what is expected, and where such a file goes.
    lone = tmp_path / "omnivoice-tokenizer-F32.gguf"
    assert convert_main([str(lone), "--outdir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "snapshot directory" in err[0] and "--from-omnivoice-cpp" in err[0]


def test_older_llm_config(tmp_path):
    # Configs from older transformers keep rope_theta at the top of llm_config and may omit
    # tie_word_embeddings (a base-class default).
    src = _copy_tiny(tmp_path / "src")
    theta = json.loads((TINY / "config.json").read_text())["llm_config"]["rope_parameters"]["rope_theta"]

    def legacy(cfg: dict) -> None:
        llm = cfg["llm_config"]
        llm["rope_theta"] = llm.pop("rope_parameters")["rope_theta"]
        del llm["tie_word_embeddings"]

    _edit_json(src / "config.json", legacy)
    md = read_gguf_metadata(convert_lm(src, tmp_path / "lm.gguf").path)
    assert md["omnivoice-lm.rope.freq_base"] == pytest.approx(theta, rel=1e-7)
    assert md["omnivoice.tie_word_embeddings"] is True

    def yarn(cfg: dict) -> None:
        cfg["llm_config"]["rope_parameters"] = {"rope_type": "yarn", "rope_theta": theta, "factor": 4.0}

    _edit_json(src / "config.json", yarn)
    with pytest.raises(ValueError, match="unsupported RoPE type 'yarn'"):
        convert_lm(src, tmp_path / "lm2.gguf")


def test_q4_k_m_mix_follows_omnivoice_cpp() -> None:
    from omnivoice.convert.omnivoice.lm import lm_tensor_type

    q = gguf.GGMLQuantizationType
    # Their tools/quantize.cpp at 28 layers: v_proj / down_proj bumped in layers < 3, >= 24 and
    # every third; both embedding tables Q6_K; everything else Q4_K; 1-D F32.
    bumped = [il for il in range(28) if lm_tensor_type("Q4_K_M", f"llm.layers.{il}.self_attn.v_proj.weight",
                                                      (1024, 1024), 28) == q.Q6_K]
    assert bumped == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 25, 26, 27]
    assert lm_tensor_type("Q4_K_M", "llm.layers.5.mlp.down_proj.weight", (1024, 3072), 28) == q.Q4_K
    assert lm_tensor_type("Q4_K_M", "llm.layers.5.self_attn.q_proj.weight", (2048, 1024), 28) == q.Q4_K
    assert lm_tensor_type("Q4_K_M", "audio_embeddings.weight", (8200, 1024), 28) == q.Q6_K
    assert lm_tensor_type("Q4_K_M", "audio_heads.weight", (8200, 1024), 28) == q.Q4_K
    assert lm_tensor_type("Q4_K_M", "llm.norm.weight", (1024,), 28) == q.F32
    assert lm_tensor_type("Q4_K_M", "audio_heads.weight", (8200, 64), 2) == q.Q8_0  # rows not of 256


def test_core_quantize_matches_gguf_py_and_rejects_bad_input() -> None:
    x = np.random.default_rng(0).normal(size=(3, 256)).astype(np.float32)
    np.testing.assert_array_equal(_core.quantize(x, "Q8_0"), gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0))
    q4 = _core.quantize(x, "q4_K")
    assert q4.shape == (3, 144) and q4.dtype == np.uint8
    assert np.abs(gguf.quants.dequantize(q4, gguf.GGMLQuantizationType.Q4_K) - x).max() < 0.25
    with pytest.raises(ValueError, match="multiple of 256"):
        _core.quantize(x[:, :128], "q4_K")
    with pytest.raises(ValueError, match="not a quantised type"):
        _core.quantize(x, "f16")
    with pytest.raises(ValueError, match="unknown ggml type"):
        _core.quantize(x, "q9_X")
