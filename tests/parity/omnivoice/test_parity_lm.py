"""The C++ LM (`_core.LM` / `LMSession`) against upstream's forward on the tiny checkpoint.

Expected values: tests/data/fixtures/lm_logits.npz (upstream `OmniVoice.forward` on its padded
[cond, uncond] batch, float32, CPU), written by tests/reference/dump_fixtures.py. The GGUF is
converted from tests/data/tiny_hf by our converter (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omnivoice import ModelFormatError, _core

DATA = Path(__file__).parents[2] / "data"

# Max |ours - upstream| / max |upstream| on the target windows. F32 measured 4e-7; BF16 and Q8_0
# round the weights, and their matmuls round the activations too: measured 4.4e-3 and 1.5e-2.
TOLERANCE = {"F32": 1e-4, "BF16": 1.5e-2, "Q8_0": 3e-2}


@pytest.fixture(scope="module", params=[False, True], ids=["custom-ops", "stock-ops"])
def backend(request: pytest.FixtureRequest) -> _core.Backend:
    # One thread: the tiny model gains nothing from more, and waiting threads are slow on
    # shared cores. Our CPU ops, then the stock ggml ops a GPU backend takes.
    return _core.Backend(1, stock_ops=request.param)


@pytest.fixture(scope="module")
def lm(tiny_lm_gguf: Path, backend: _core.Backend) -> _core.LM:
    return _core.LM(str(tiny_lm_gguf), backend)


@pytest.fixture(scope="module")
def fixture() -> dict[str, np.ndarray]:
    with np.load(DATA / "fixtures" / "lm_logits.npz") as f:
        return dict(f)


def padded_rows_to_segments(
    input_ids: np.ndarray, audio_mask: np.ndarray, attention_mask: np.ndarray
) -> tuple[list[tuple[int, int, int]], np.ndarray, np.ndarray]:
    """Repacks upstream's padded [cond..., uncond...] batch: per item its cond then its uncond row.

    A row's real length is how many positions its first position may attend to; an uncond row is
    all target, a cond row ends with the target window, whose length is that of its uncond row.
    """
    n_items = input_ids.shape[0] // 2
    segments, ids, masks = [], [], []
    for i in range(n_items):
        c_len = int(attention_mask[i, 0].sum())
        t_len = int(attention_mask[n_items + i, 0].sum())
        segments += [(c_len, c_len - t_len, t_len), (t_len, 0, t_len)]
        ids += [input_ids[i, :, :c_len], input_ids[n_items + i, :, :t_len]]
        masks += [audio_mask[i, :c_len], audio_mask[n_items + i, :t_len]]
    return segments, np.concatenate(ids, axis=1).astype(np.int32), np.concatenate(masks)


def upstream_target_logits(fx: dict[str, np.ndarray]) -> np.ndarray:
    """Upstream's logits of the cond and uncond target windows as [T_c + T_u, 8, 1025]."""
    c_len = int(fx["attention_mask"][0, 0].sum())
    t_len = int(fx["attention_mask"][1, 0].sum())
    cond = fx["logits"][0, :, c_len - t_len : c_len]
    uncond = fx["logits"][1, :, :t_len]
    return np.concatenate([cond, uncond], axis=1).transpose(1, 0, 2)


def max_rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| relative to max |want|."""
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("outtype", ["F32", "BF16", "Q8_0"])
def test_target_logits_match_upstream(
    outtype: str, tiny_gguf, backend: _core.Backend, fixture: dict[str, np.ndarray]
) -> None:
    lm = _core.LM(str(tiny_gguf("lm", outtype)), backend)
    segments, ids, mask = padded_rows_to_segments(
        fixture["input_ids"], fixture["audio_mask"], fixture["attention_mask"]
    )
    session = lm.session(segments)
    logits = session.forward(ids, mask)

    want = upstream_target_logits(fixture)
    assert logits.shape == want.shape == (session.n_target, lm.num_audio_codebook, lm.audio_vocab_size)
    assert logits.dtype == np.float32
    assert max_rel_err(logits, want) <= TOLERANCE[outtype]


def test_steps_reuse_the_session(lm: _core.LM, fixture: dict[str, np.ndarray]) -> None:
    # A second step with other target tokens must not see anything of the first.
    segments, ids, mask = padded_rows_to_segments(
        fixture["input_ids"], fixture["audio_mask"], fixture["attention_mask"]
    )
    session = lm.session(segments)
    other = ids.copy()
    other[:, mask] = np.random.default_rng(0).integers(0, 1024, (ids.shape[0], int(mask.sum())))
    first = session.forward(ids, mask)
    session.forward(other, mask)
    np.testing.assert_array_equal(session.forward(ids, mask), first)


def test_packed_batch_equals_items_alone(lm: _core.LM, fixture: dict[str, np.ndarray]) -> None:
    segments, ids, mask = padded_rows_to_segments(
        fixture["batch2_input_ids"], fixture["batch2_audio_mask"], fixture["batch2_attention_mask"]
    )
    assert len(segments) == 4 and segments[0][0] != segments[2][0]
    packed = lm.session(segments).forward(ids, mask)

    alone, start = [], 0
    for item in (segments[:2], segments[2:]):
        length = sum(s[0] for s in item)
        alone.append(lm.session(item).forward(ids[:, start : start + length], mask[start : start + length]))
        start += length
    np.testing.assert_allclose(packed, np.concatenate(alone), rtol=0, atol=1e-5 * np.abs(packed).max())


def test_hparams_and_metadata(lm: _core.LM) -> None:
    assert (lm.n_layer, lm.hidden_size, lm.n_head, lm.n_head_kv, lm.head_dim) == (2, 64, 4, 2, 16)
    assert (lm.num_audio_codebook, lm.audio_vocab_size, lm.audio_mask_id) == (8, 1025, 1024)
    assert lm.metadata["general.architecture"] == "omnivoice-lm"
    assert lm.metadata["omnivoice-lm.vocab_size"] == lm.vocab_size


def test_session_rejects_bad_segments(lm: _core.LM) -> None:
    for segments, what in [
        ([], "at least one segment"),
        ([(0, 0, 0)], "length must be positive"),
        ([(10, 5, 6)], "target window"),
        ([(10, -1, 3)], "target window"),
        ([(10, 2, 0)], "target window"),
        ([(lm.context_length + 1, 0, 1)], "context length"),
    ]:
        with pytest.raises(ValueError, match=what):
            lm.session(segments)


def test_forward_rejects_bad_input(lm: _core.LM) -> None:
    session = lm.session([(6, 2, 4), (4, 0, 4)])
    mask = np.array([False, False, True, True, True, True] + [True] * 4)
    ids = np.full((8, 10), 1024, dtype=np.int32)
    ids[:, :2] = 7
    assert session.forward(ids, mask).shape == (8, 8, 1025)
    assert session.forward(ids.astype(np.int64), mask).shape == (8, 8, 1025)

    def bad(ids_: np.ndarray, mask_: np.ndarray, what: str) -> None:
        with pytest.raises(ValueError, match=what):
            session.forward(ids_, mask_)

    bad(ids[:, :9], mask, "input_ids must have shape")
    bad(ids[:7], mask, "input_ids must have shape")
    bad(ids.astype(np.float32), mask, "integer array")
    bad(ids, mask[:9], "audio_mask must have shape")
    bad(ids, mask.astype(np.int32), "bool array")
    for row, col, value, what in [
        (0, 0, lm.vocab_size, "text position"),
        (0, 1, -1, "text position"),
        (3, 4, 1025, "audio position"),
        (7, 9, -2, "audio position"),
    ]:
        wrong = ids.copy()
        wrong[row, col] = value
        bad(wrong, mask, what)
    huge = ids.astype(np.int64)
    huge[0, 0] = 2**40
    bad(huge, mask, "outside int32")
    # Rows 1..7 at text positions are never read (upstream zeroes them before its lookup).
    ignored = ids.copy()
    ignored[1:, :2] = 10**6
    np.testing.assert_array_equal(session.forward(ignored, mask), session.forward(ids, mask))


def test_loader_rejects_bad_files(tiny_lm_gguf: Path, backend: _core.Backend, tmp_path: Path, rewrite_gguf) -> None:
    src = tiny_lm_gguf
    missing = tmp_path / "missing.gguf"
    rewrite_gguf(src, missing, drop="llm.layers.1.self_attn.k_norm.weight")
    with pytest.raises(ModelFormatError, match="missing tensor llm.layers.1.self_attn.k_norm.weight"):
        _core.LM(str(missing), backend)
    extra = tmp_path / "extra.gguf"
    rewrite_gguf(src, extra, extra="lm_head.weight")
    with pytest.raises(ModelFormatError, match="unexpected tensor lm_head.weight"):
        _core.LM(str(extra), backend)
    with pytest.raises(ModelFormatError, match="no such file"):
        _core.LM(str(tmp_path / "absent.gguf"), backend)
