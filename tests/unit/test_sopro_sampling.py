"""omnivoice.models.sopro.sampling against sopro 2.2.0's sample_next_token: the distribution it hands
to torch.multinomial (tests/data/fixtures/sopro/sampling.npz, by tests/reference/sopro/dump_fixtures.py),
greedy masking, our draw from that distribution, and bad arguments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from omnivoice.models.sopro.sampling import filtered_probs, sample_next_token

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures" / "sopro"
DATA = np.load(FIXTURES / "sampling.npz")
CASES = json.loads((FIXTURES / "sampling.json").read_text())["cases"]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_distribution_as_upstream(i):
    c = CASES[i]
    got = filtered_probs(DATA[f"s{i}.logits"][0], c["temperature"], c["top_p"], c["top_k"], c["bos_id"],
                         c["eos_id"], c["allow_eos"])
    want = DATA[f"s{i}.probs"][0]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got > 0, want > 0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_greedy_masks_bos_and_eos():
    logits = np.array([0.0, 1.0, 5.0, 4.0], dtype=np.float32)  # BOS 2, EOS 3
    assert sample_next_token(logits, 0.0, 0.9, 25, 2, 3, allow_eos=True) == 3
    assert sample_next_token(logits, 0.0, 0.9, 25, 2, 3, allow_eos=False) == 1


def test_draws_follow_the_distribution():
    c = CASES[1]
    logits = DATA["s1.logits"][0]
    probs = filtered_probs(logits, c["temperature"], c["top_p"], c["top_k"], c["bos_id"], c["eos_id"], c["allow_eos"])
    rng = np.random.default_rng(5)
    n = 20000
    counts = np.bincount([sample_next_token(logits, c["temperature"], c["top_p"], c["top_k"], c["bos_id"],
                                            c["eos_id"], c["allow_eos"], rng) for _ in range(n)], minlength=probs.size)
    assert np.all(counts[probs == 0] == 0)
    # 5 standard deviations of a binomial count, per kept token
    sd = np.sqrt(n * probs * (1 - probs))
    assert np.all(np.abs(counts - n * probs) <= 5 * sd + 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature=float("nan")), "temperature"),
        (dict(top_k=-1), "top_k"),
        (dict(top_p=float("inf")), "top_p"),
        (dict(bos_id=99), "bos_id"),
        (dict(logits=np.array([0.0, np.nan, 1.0])), "finite"),
        (dict(logits=np.zeros((2, 3))), "1-D"),
        (dict(rng=None), "rng"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = dict(logits=np.zeros(4, dtype=np.float32), temperature=0.8, top_p=0.9, top_k=2, bos_id=2, eos_id=3,
                allow_eos=True, rng=np.random.default_rng(0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sample_next_token(**args)
