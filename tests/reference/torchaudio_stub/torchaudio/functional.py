"""``torchaudio.functional.resample`` implemented with soxr."""

import numpy as np
import soxr
import torch


def resample(
    waveform: torch.Tensor,
    orig_freq: int,
    new_freq: int,
    *args: object,
    **kwargs: object,
) -> torch.Tensor:
    """Resample ``waveform`` along its last axis with soxr (quality "HQ").

    Extra positional/keyword arguments of torchaudio's signature (filter
    width, rolloff, method, beta) are accepted and ignored.

    Args:
        waveform: Tensor of shape (..., time).
        orig_freq: Input sample rate in Hz.
        new_freq: Output sample rate in Hz.

    Returns:
        The resampled tensor, shape (..., new_time), same dtype and device.
    """
    orig_freq, new_freq = int(orig_freq), int(new_freq)
    if orig_freq <= 0 or new_freq <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_freq} -> {new_freq}")
    if orig_freq == new_freq:
        return waveform
    lead_shape = waveform.shape[:-1]
    flat = waveform.detach().reshape(-1, waveform.shape[-1]).to("cpu", torch.float64).numpy()
    # soxr takes (frames, channels)
    out = soxr.resample(np.ascontiguousarray(flat.T), orig_freq, new_freq, quality="HQ")
    out = np.ascontiguousarray(np.asarray(out).reshape(out.shape[0], -1).T)
    result = torch.from_numpy(out).to(device=waveform.device, dtype=waveform.dtype)
    return result.reshape(*lead_shape, result.shape[-1])
