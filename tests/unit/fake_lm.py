"""A deterministic stand-in for the OmniVoice LM, shared by the fixture script and the tests.

Everything is integer arithmetic plus one float64 -> float32 conversion, so numpy gives
bit-identical values in the reference venv (which feeds them to upstream's decoding loop)
and in ours. The logits of a segment depend on every token and audio-mask flag of the
segment (attention is bidirectional), on the position, codebook and vocabulary index.
"""

from __future__ import annotations

import numpy as np

_PRIME = 1_000_003
_SPAN = 8.0  # logits lie in [-SPAN/2, SPAN/2)


def _mix(x: np.ndarray) -> np.ndarray:
    """x**5 mod the prime: a bijection of [0, prime) (5 is coprime to prime - 1) that scrambles order."""
    x2 = x * x % _PRIME
    return x2 * x2 % _PRIME * x % _PRIME


def hashed_values(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Pseudo-random float32 values in [-4, 4), reproducible across numpy versions."""
    idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    val = _mix((idx * 7_368_787 + seed * 2_750_159 + 1_234_567) % _PRIME)
    return (val / _PRIME * _SPAN - _SPAN / 2).astype(np.float32)


def segment_logits(input_ids: np.ndarray, audio_mask: np.ndarray, positions: np.ndarray, vocab: int) -> np.ndarray:
    """Logits ``[len(positions), C, vocab]`` of one segment ``input_ids [C, n]``, ``audio_mask [n]``."""
    num_codebooks, n = input_ids.shape
    weights = (
        np.arange(n, dtype=np.int64)[None, :] * 7_919 + np.arange(num_codebooks, dtype=np.int64)[:, None] * 104_729 + 13
    ) % _PRIME
    flags = audio_mask.astype(np.int64)[None, :] + 1
    content = int((input_ids.astype(np.int64) * weights * flags).sum() % _PRIME)
    p = np.asarray(positions, dtype=np.int64)[:, None, None]
    c = np.arange(num_codebooks, dtype=np.int64)[None, :, None]
    v = np.arange(vocab, dtype=np.int64)[None, None, :]
    val = _mix((content * 31 + p * 7_927 + c * 1_299_709 + v * 2_654_435) % _PRIME)
    return (val / _PRIME * _SPAN - _SPAN / 2).astype(np.float32)


def packed_forward(segments: list[tuple[int, int, int]], vocab: int):
    """The fake LM as a packed-segments ``forward(input_ids, audio_mask)`` callable."""

    def forward(input_ids: np.ndarray, audio_mask: np.ndarray) -> np.ndarray:
        out, start = [], 0
        for length, target_start, target_len in segments:
            seg = slice(start, start + length)
            positions = np.arange(target_start, target_start + target_len)
            out.append(segment_logits(input_ids[:, seg], audio_mask[seg], positions, vocab))
            start += length
        return np.concatenate(out)

    return forward
