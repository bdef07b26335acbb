"""The shared causal decoder (csrc/nn/causal_decoder.h) against a numpy transformer, in the variants
the families need: Sopro's (RMSNorm, q/k norm, NEOX RoPE, SwiGLU), Whisper's decoder (LayerNorm, no
RoPE, GELU, biases on q, v, o and the FFN, cross-attention over encoder states through the cross
cache) and Qwen3's GQA without a final norm. The
input is fed in calls of several sizes on one KV cache, across a 256-position bucket, so a wrong
cache write, position, mask or bucket switch shows up as a wrong row.
"""

from __future__ import annotations

import math
from pathlib import Path

import gguf
import numpy as np
import pytest

from omnivoice import _core

ARCH = "test-decoder"
NAMES = dict(layers="blk", attn_norm="attn_norm", q="q", k="k", v="v", o="o", q_norm="q_norm", k_norm="k_norm",
             ffn_norm="ffn_norm", ffn_gate="gate", ffn_up="up", ffn_down="down", final_norm="final_norm",
             cross_norm="x_norm", cross_q="xq", cross_k="xk", cross_v="xv", cross_o="xo")
BASE = dict(n_layer=2, n_embd=32, n_head=4, n_head_kv=4, head_dim=8, n_ff=48, norm="rms", norm_eps=1e-6,
            qk_norm=False, rope="none", rope_base=10000.0, ffn="swiglu", bias_q=False, bias_k=False, bias_v=False,
            bias_o=False, bias_ffn=False, final_norm=True, cross_attention=False, n_embd_cross=0)
VARIANTS = {
    "sopro": dict(qk_norm=True, rope="neox"),
    "whisper": dict(norm="layer", norm_eps=1e-5, ffn="gelu_erf", bias_q=True, bias_v=True, bias_o=True, bias_ffn=True,
                    cross_attention=True, n_embd_cross=24),
    "qwen3-gqa": dict(n_head_kv=2, qk_norm=True, rope="neox", rope_base=1e6, final_norm=False),
}
N_TOKENS = 300
N_CROSS = 37
CHUNKS = [130, 1, 1, 2, 100, 1, 30, 35]  # crosses 256 positions mid-way


def make_weights(hp: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d, hd = hp["n_embd"], hp["head_dim"]
    nq, nkv, ff = hp["n_head"] * hd, hp["n_head_kv"] * hd, hp["n_ff"]
    w: dict[str, np.ndarray] = {}

    def mat(name, n_out, n_in, bias):
        w[f"{name}.weight"] = (rng.standard_normal((n_out, n_in)) / math.sqrt(n_in)).astype(np.float32)
        if bias:
            w[f"{name}.bias"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)

    def norm(name, n, layer=hp["norm"] == "layer"):
        w[f"{name}.weight"] = (1 + 0.2 * rng.standard_normal(n)).astype(np.float32)
        if layer:
            w[f"{name}.bias"] = (0.1 * rng.standard_normal(n)).astype(np.float32)

    for il in range(hp["n_layer"]):
        p = f"blk.{il}."
        norm(p + "attn_norm", d)
        mat(p + "q", nq, d, hp["bias_q"])
        mat(p + "k", nkv, d, hp["bias_k"])
        mat(p + "v", nkv, d, hp["bias_v"])
        mat(p + "o", d, nq, hp["bias_o"])
        if hp["cross_attention"]:
            norm(p + "x_norm", d)
            mat(p + "xq", nq, d, hp["bias_q"])
            mat(p + "xk", nkv, hp["n_embd_cross"], hp["bias_k"])
            mat(p + "xv", nkv, hp["n_embd_cross"], hp["bias_v"])
            mat(p + "xo", d, nq, hp["bias_o"])
        if hp["qk_norm"]:
            norm(p + "q_norm", hd, layer=False)
            norm(p + "k_norm", hd, layer=False)
        norm(p + "ffn_norm", d)
        if hp["ffn"] == "swiglu":
            mat(p + "gate", ff, d, hp["bias_ffn"])
        mat(p + "up", ff, d, hp["bias_ffn"])
        mat(p + "down", d, ff, hp["bias_ffn"])
    if hp["final_norm"]:
        norm("final_norm", d)
    return w


def reference(hp: dict, w: dict[str, np.ndarray], x: np.ndarray, enc: np.ndarray | None) -> np.ndarray:
    """The decoder in float64 numpy, over all positions at once with a causal mask."""
    n, hd, nh, nkv = len(x), hp["head_dim"], hp["n_head"], hp["n_head_kv"]
    x = x.astype(np.float64)

    def lin(name, h):
        y = h @ w[f"{name}.weight"].T.astype(np.float64)
        return y + w[f"{name}.bias"] if f"{name}.bias" in w else y

    def norm(name, h, rms=hp["norm"] == "rms"):
        if rms:
            return h / np.sqrt(np.mean(h * h, -1, keepdims=True) + hp["norm_eps"]) * w[f"{name}.weight"]
        c = h - h.mean(-1, keepdims=True)
        return c / np.sqrt(np.mean(c * c, -1, keepdims=True) + hp["norm_eps"]) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def rope(h):  # [n, heads, hd], NEOX halves
        inv = hp["rope_base"] ** (-np.arange(0, hd, 2) / hd)
        ang = np.arange(n)[:, None] * inv[None]
        cos, sin = np.cos(np.concatenate([ang, ang], -1))[:, None], np.sin(np.concatenate([ang, ang], -1))[:, None]
        rot = np.concatenate([-h[..., hd // 2 :], h[..., : hd // 2]], -1)
        return h * cos + rot * sin

    def attend(q, k, v, mask):  # q [n, nh, hd], k/v [m, nkv, hd]
        k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        if mask is not None:
            s = np.where(mask[None], s, -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        return np.einsum("hqk,khd->qhd", a, v).reshape(len(q), nh * hd)

    erf = np.vectorize(math.erf)
    causal = np.tril(np.ones((n, n), dtype=bool))
    for il in range(hp["n_layer"]):
        p = f"blk.{il}."
        h = norm(p + "attn_norm", x)
        q = lin(p + "q", h).reshape(n, nh, hd)
        k = lin(p + "k", h).reshape(n, nkv, hd)
        v = lin(p + "v", h).reshape(n, nkv, hd)
        if hp["qk_norm"]:
            q, k = norm(p + "q_norm", q, rms=True), norm(p + "k_norm", k, rms=True)
        if hp["rope"] == "neox":
            q, k = rope(q), rope(k)
        x = x + lin(p + "o", attend(q, k, v, causal))
        if hp["cross_attention"]:
            e = enc.astype(np.float64)
            qx = lin(p + "xq", norm(p + "x_norm", x)).reshape(n, nh, hd)
            kx, vx = lin(p + "xk", e).reshape(-1, nkv, hd), lin(p + "xv", e).reshape(-1, nkv, hd)
            x = x + lin(p + "xo", attend(qx, kx, vx, None))
        h = norm(p + "ffn_norm", x)
        if hp["ffn"] == "swiglu":
            g = lin(p + "gate", h)
            f = g / (1 + np.exp(-g)) * lin(p + "up", h)
        else:
            u = lin(p + "up", h)
            f = 0.5 * u * (1 + erf(u / math.sqrt(2)))
        x = x + lin(p + "down", f)
    return norm("final_norm", x) if hp["final_norm"] else x


def write_gguf(path: Path, w: dict[str, np.ndarray]) -> None:
    writer = gguf.GGUFWriter(path, ARCH)
    for name, value in w.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("stock_ops", [False, True], ids=["custom-ops", "stock-ops"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_decoder_matches_numpy(tmp_path, variant, stock_ops):
    hp = dict(BASE, **VARIANTS[variant])
    rng = np.random.default_rng(3)
    w = make_weights(hp, rng)
    path = tmp_path / "decoder.gguf"
    write_gguf(path, w)
    x = rng.standard_normal((N_TOKENS, hp["n_embd"])).astype(np.float32)
    enc = rng.standard_normal((N_CROSS, hp["n_embd_cross"])).astype(np.float32) if hp["cross_attention"] else None
    got = _core.testing.run_decoder(str(path), ARCH, _core.Backend(1, stock_ops=stock_ops), hp, NAMES, x, CHUNKS,
                                    N_TOKENS, enc)
    want = reference(hp, w, x, enc)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-5, f"{variant}: {err:.2e}"


def test_bad_calls(tmp_path):
    hp = dict(BASE, **VARIANTS["sopro"])
    w = make_weights(hp, np.random.default_rng(0))
    path = tmp_path / "decoder.gguf"
    write_gguf(path, w)
    x = np.zeros((4, hp["n_embd"]), dtype=np.float32)
    with pytest.raises(ValueError, match="this one holds 256"):  # 300 positions: bucket 512
        _core.testing.run_decoder(str(path), ARCH, _core.Backend(1), hp, NAMES, np.zeros((300, 32), np.float32),
                                  [300], 200)
    with pytest.raises(_core.ModelFormatError, match="multiple of the KV head count"):
        _core.testing.run_decoder(str(path), ARCH, _core.Backend(1), dict(hp, n_head_kv=3), NAMES, x, [4], 8)
    whisper = dict(BASE, **VARIANTS["whisper"])
    write_gguf(path, make_weights(whisper, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="cross-attention cache"):
        _core.testing.run_decoder(str(path), ARCH, _core.Backend(1), whisper, NAMES, x, [4], 8)
