"""Sopro's next-token sampling (sopro 2.2.0 ``sampling.sample_next_token``) in numpy.

The arithmetic is upstream's step by step, in float32 as torch runs it: BOS always masked and EOS
until allowed (logit -1e9), greedy at temperature <= 0, else softmax of logits / max(1e-5, T), top-k
(probabilities below the k-th largest zeroed), top-p (sorted cumulative sum, every token past the
first that crosses top_p zeroed), each renormalised by max(sum, 1e-8). Only the final draw differs:
upstream calls ``torch.multinomial``, we invert the CDF on a numpy ``Generator``, so sampled tokens
match upstream's distribution, not its draws.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["filtered_probs", "sample_next_token"]

_MASKED = np.float32(-1e9)


def _masked(logits: np.ndarray, bos_id: int, eos_id: int, allow_eos: bool) -> np.ndarray:
    x = np.asarray(logits)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"logits must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("logits must be finite")
    for name, i in (("bos_id", bos_id), ("eos_id", eos_id)):
        if not 0 <= int(i) < x.size:
            raise ValueError(f"{name} {i} is outside [0, {x.size})")
    x = x.astype(np.float32, copy=True)
    x[int(bos_id)] = _MASKED
    if not allow_eos:
        x[int(eos_id)] = _MASKED
    return x


def filtered_probs(
    logits: np.ndarray, temperature: float, top_p: float, top_k: int, bos_id: int, eos_id: int, allow_eos: bool
) -> np.ndarray:
    """The distribution upstream hands to ``torch.multinomial`` (float32 [V]).

    Args:
        logits: float [V], one position's logits.
        temperature: > 0 (greedy decoding has no distribution: see :func:`sample_next_token`).
        top_p: nucleus mass; 1 or more keeps every token.
        top_k: tokens kept by probability; 0 or >= V keeps every token.
        bos_id, eos_id: the ids masked (EOS only while ``allow_eos`` is false).

    Raises:
        ValueError: non-finite or empty logits, an id out of range, temperature <= 0 or not
            finite, a negative top_k, or a non-finite top_p.
    """
    if not math.isfinite(temperature) or temperature <= 0.0:
        raise ValueError(f"temperature must be a finite number > 0 here, got {temperature}")
    if not math.isfinite(top_p):
        raise ValueError(f"top_p must be finite, got {top_p}")
    if int(top_k) != top_k or top_k < 0:
        raise ValueError(f"top_k must be a non-negative integer, got {top_k}")
    x = _masked(logits, bos_id, eos_id, allow_eos) / np.float32(max(1e-5, float(temperature)))
    e = np.exp(x - x.max())
    probs = e / e.sum(dtype=np.float32)
    if 0 < int(top_k) < probs.size:
        kth = np.partition(probs, probs.size - int(top_k))[probs.size - int(top_k)]
        probs = np.where(probs < kth, np.float32(0.0), probs)
        probs = probs / max(probs.sum(dtype=np.float32), np.float32(1e-8))
    if top_p < 1.0:
        p = max(0.0, min(1.0, float(top_p)))
        order = np.argsort(-probs, kind="stable")
        sorted_probs = probs[order]
        # torch's CPU cumsum of float32 accumulates in double
        cdf = np.cumsum(sorted_probs, dtype=np.float64).astype(np.float32)
        remove = np.empty(cdf.shape, dtype=bool)
        remove[1:] = cdf[:-1] > np.float32(p)
        remove[0] = False
        nucleus = np.zeros_like(probs)
        nucleus[order] = np.where(remove, np.float32(0.0), sorted_probs)
        probs = nucleus / max(nucleus.sum(dtype=np.float32), np.float32(1e-8))
    return probs.astype(np.float32, copy=False)


def sample_next_token(
    logits: np.ndarray,
    temperature: float,
    top_p: float,
    top_k: int,
    bos_id: int,
    eos_id: int,
    allow_eos: bool,
    rng: np.random.Generator | None = None,
) -> int:
    """The next semantic id: the masked argmax at temperature <= 0, else a draw from
    :func:`filtered_probs` with ``rng``.

    Raises:
        ValueError: as :func:`filtered_probs`, or ``rng`` missing when sampling.
    """
    if not math.isfinite(temperature):
        raise ValueError(f"temperature must be finite, got {temperature}")
    if temperature <= 0.0:
        return int(np.argmax(_masked(logits, bos_id, eos_id, allow_eos)))
    if rng is None:
        raise ValueError("rng is required when temperature > 0")
    probs = filtered_probs(logits, temperature, top_p, top_k, bos_id, eos_id, allow_eos).astype(np.float64)
    cdf = np.cumsum(probs)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), probs.size - 1))
