"""The Higgs Audio v2 audio tokenizer (codec): audio codes <-> 24 kHz audio.

Codes are an int32 array ``[n_codebooks, T]`` (8 codebooks of 1024 entries, 25 frames per
second); decoding gives ``T * 960`` float32 samples at 24 kHz. Encoding takes audio at any rate,
mono ``[n]`` or channels-first ``[channels, n]``.

Codes files (``.ovrq``) hold one such array, little-endian::

    offset  size  field
    0       4     magic b"OVRQ"
    4       4     u32 format version (1)
    8       4     u32 n_codebooks
    12      4     u32 n_frames (T)
    16      4     u32 sample_rate of the audio the codes stand for (24000)
    20      4     u32 frame_rate in frames per second (25)
    24      ...   int32 codes, row-major [n_codebooks, n_frames]
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt
from ... import _core
from ...audio import to_mono
from ...model_files import codec_in_our_layout
from ...threads import resolve_n_threads, usable_cores

__all__ = ["AudioTokenizer", "load_codes", "save_codes"]

logger = logging.getLogger(__name__)

CODES_MAGIC = b"OVRQ"
CODES_VERSION = 1
_HEADER = struct.Struct("<4s5I")


class AudioTokenizer:
    """The codec loaded from an ``omnivoice-tokenizer-*.gguf`` file (see :meth:`from_file`)."""

    def __init__(self, codec: _core.Codec) -> None:
        """Wraps a loaded core codec; use :meth:`from_file` to load one."""
        self._codec = codec

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], n_threads: int | None = None) -> AudioTokenizer:
        """Loads the codec from a GGUF file.

        Args:
            path: An ``omnivoice-tokenizer-*.gguf`` file written by ``omnivoice-convert``, or
                omnivoice.cpp's (converted once into the cache).
            n_threads: CPU threads for compute, at most the usable cores (more is capped with a
                warning); None uses every usable core.

        Returns:
            The loaded tokenizer.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            ValueError: The file is not a valid codec GGUF (``omnivoice.ModelFormatError``), or
                ``n_threads`` is not positive.
            TypeError: ``n_threads`` is not an int.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"codec GGUF not found: {path}")
        backend = _core.Backend(resolve_n_threads(n_threads) or usable_cores())
        codec = _core.Codec(str(codec_in_our_layout(path)), backend)
        logger.info("loaded codec %s (%d codebooks, %d Hz)", path, codec.n_codebooks, codec.sample_rate)
        return cls(codec)

    @property
    def sample_rate(self) -> int:
        """Audio sample rate in Hz (24000)."""
        return self._codec.sample_rate

    @property
    def hop_length(self) -> int:
        """Audio samples per code frame (960)."""
        return self._codec.hop_length

    @property
    def frame_rate(self) -> int:
        """Code frames per second (25)."""
        return self._codec.frame_rate

    @property
    def n_codebooks(self) -> int:
        """Codebooks per frame (8)."""
        return self._codec.n_codebooks

    @property
    def codebook_size(self) -> int:
        """Entries per codebook (1024)."""
        return self._codec.codebook_size

    @property
    def has_encoder(self) -> bool:
        """Whether the file holds the encoder half (audio -> codes)."""
        return self._codec.has_encoder

    @property
    def metadata(self) -> dict[str, object]:
        """All GGUF metadata of the loaded file."""
        return self._codec.metadata

    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        """Decodes audio codes to a waveform.

        Args:
            codes: Integer array ``[n_codebooks, T]`` with ``T >= 1`` and every id in
                ``[0, codebook_size)``.

        Returns:
            float32 array of ``T * hop_length`` samples at :attr:`sample_rate`.

        Raises:
            ValueError: ``codes`` has the wrong shape or dtype, or an id out of range.
        """
        return self._codec.decode(np.asarray(codes))

    @property
    def semantic_sample_rate(self) -> int:
        """Sample rate of the HuBERT (semantic) stream in Hz (16000)."""
        return self._codec.semantic_sample_rate

    def encode(self, wave: npt.ArrayLike, sample_rate: int) -> np.ndarray:
        """Encodes audio to codes, as the reference ``HiggsAudioV2TokenizerModel.encode``.

        The audio is brought to mono at :attr:`sample_rate` (24 kHz, :func:`omnivoice.audio.to_mono`);
        the codec then resamples that to 16 kHz for HuBERT, as the reference does. Lengths that are not a
        whole number of frames are padded the reference's way; callers that want upstream
        OmniVoice's voice-clone prompt first drop the partial last frame
        (:func:`omnivoice.audio.truncate_to_hop`).

        Args:
            wave: Mono ``[n]`` or channels-first ``[channels, n]`` samples, float in [-1, 1] or
                int16 / int32 PCM, at ``sample_rate``.
            sample_rate: Rate of ``wave`` in Hz.

        Returns:
            int32 codes ``[n_codebooks, T]``, T about ``n / sample_rate * frame_rate``.

        Raises:
            ValueError: Bad audio (see :func:`omnivoice.audio.to_mono`), audio shorter than one
                frame, or a file converted without the encoder (both checked by the core codec).
        """
        if not self.has_encoder:  # before resampling: such a file states no semantic rate
            raise ValueError("this codec file has no encoder (converted with --no-encoder); it can only decode")
        wave24 = to_mono(wave, sample_rate, self.sample_rate)
        wave16 = to_mono(wave24, self.sample_rate, self.semantic_sample_rate)
        return self._codec.encode(wave24, wave16)


def save_codes(
    path: str | os.PathLike[str],
    codes: npt.ArrayLike,
    sample_rate: int = 24000,
    frame_rate: int = 25,
) -> None:
    """Writes codes to a ``.ovrq`` file (format in this module's docstring).

    Args:
        path: Output file.
        codes: Integer array ``[n_codebooks, T]`` with ids that fit in int32.
        sample_rate: Sample rate of the audio the codes stand for.
        frame_rate: Code frames per second.

    Raises:
        ValueError: ``codes`` is not a 2-D integer array or holds ids outside int32.
    """
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.dtype.kind not in "iu":
        raise ValueError(f"codes must be a 2-D integer array, got {arr.ndim}-D {arr.dtype}")
    info = np.iinfo(np.int32)
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise ValueError("codes hold ids outside int32")
    header = _HEADER.pack(CODES_MAGIC, CODES_VERSION, arr.shape[0], arr.shape[1], sample_rate, frame_rate)
    with open(path, "wb") as f:
        f.write(header)
        f.write(np.ascontiguousarray(arr, dtype="<i4").tobytes())


def load_codes(path: str | os.PathLike[str]) -> np.ndarray:
    """Reads codes from a ``.ovrq`` file.

    Args:
        path: File written by :func:`save_codes`.

    Returns:
        int32 array ``[n_codebooks, T]``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: The file is not a codes file, has an unknown version, or is truncated.
    """
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEADER.size or data[:4] != CODES_MAGIC:
        raise ValueError(f"{path}: not a codes file (no OVRQ header)")
    _, version, n_codebooks, n_frames, _, _ = _HEADER.unpack_from(data)
    if version != CODES_VERSION:
        raise ValueError(f"{path}: codes format version {version} is not supported (expected {CODES_VERSION})")
    expected = _HEADER.size + 4 * n_codebooks * n_frames
    if len(data) != expected:
        raise ValueError(f"{path}: {len(data)} bytes, expected {expected} for {n_codebooks} x {n_frames} codes")
    codes = np.frombuffer(data, dtype="<i4", offset=_HEADER.size).reshape(n_codebooks, n_frames)
    return codes.astype(np.int32)
