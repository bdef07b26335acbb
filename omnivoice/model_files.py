"""Find the two GGUF files of a model from what a user passes as ``model``.

Accepted: the LM GGUF itself (the codec GGUF is looked up beside it), a directory holding both
GGUFs, a Hugging Face snapshot directory of ``k2-fsa/OmniVoice`` (converted once into a cache), or
a Hub id such as ``"k2-fsa/OmniVoice"`` (downloaded with ``huggingface_hub``, then converted).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# When a directory holds several LM files, the first type found here wins.
LM_TYPE_PREFERENCE = ("BF16", "Q8_0", "F16", "F32")
DEFAULT_CONVERT_TYPE = "BF16"


@dataclass(frozen=True)
class ModelFiles:
    """Paths of the LM GGUF (``omnivoice-base-*.gguf``) and codec GGUF (``omnivoice-tokenizer-*.gguf``)."""

    lm: Path
    codec: Path


def cache_dir() -> Path:
    """Where converted snapshots are kept: ``$OMNIVOICE_CACHE`` or ``~/.cache/omnivoice``."""
    env = os.environ.get("OMNIVOICE_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "omnivoice"


def _pick(candidates: list[Path], kind: str, where: Path) -> Path:
    if not candidates:
        raise FileNotFoundError(f"no {kind} GGUF (omnivoice-{kind}-*.gguf) in {where}")
    by_type = {p.stem.rsplit("-", 1)[-1].upper(): p for p in candidates}
    for t in LM_TYPE_PREFERENCE:
        if t in by_type:
            return by_type[t]
    return sorted(candidates)[0]


def _from_gguf_dir(directory: Path, lm: Path | None = None) -> ModelFiles:
    lm = lm or _pick(sorted(directory.glob("omnivoice-base-*.gguf")), "base", directory)
    codec = _pick(sorted(directory.glob("omnivoice-tokenizer-*.gguf")), "tokenizer", directory)
    return ModelFiles(lm=lm, codec=codec)


def _is_snapshot(directory: Path) -> bool:
    return (directory / "config.json").is_file() and (directory / "audio_tokenizer").is_dir()


def _convert_snapshot(snapshot: Path, outtype: str) -> ModelFiles:
    from .convert import convert_model

    key = hashlib.sha256(str(snapshot.resolve()).encode()).hexdigest()[:16]
    out = cache_dir() / "converted" / key
    done = out / f"DONE-{outtype}"
    if not done.exists():
        # Minutes of silent work otherwise (3 GB read, 1.9 GB written): said at WARNING so that
        # the CLIs show it.
        logger.warning("converting %s to GGUF (%s) in %s: once, a few minutes", snapshot, outtype, out)
        start = time.monotonic()
        out.mkdir(parents=True, exist_ok=True)
        convert_model(snapshot, out, outtype=outtype)
        done.write_text(str(snapshot.resolve()))
        logger.warning("converted in %.0f s", time.monotonic() - start)
    return _from_gguf_dir(out, out / f"omnivoice-base-{outtype}.gguf")


def _download(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        raise FileNotFoundError(
            f"{repo_id!r} is not a local path, and huggingface_hub is not installed to download it: "
            "pip install huggingface_hub, or pass a directory of converted GGUFs "
            "(see omnivoice-convert)"
        ) from e
    try:
        return Path(snapshot_download(repo_id))
    except Exception as e:  # network errors come in many types
        raise FileNotFoundError(
            f"could not download {repo_id!r} from the Hugging Face Hub ({type(e).__name__}: {e}). "
            "Offline, pass the GGUF files or a directory holding them, or a local snapshot directory"
        ) from e


def resolve_model(model: str | os.PathLike[str], codec: str | os.PathLike[str] | None = None,
                  convert_type: str = DEFAULT_CONVERT_TYPE) -> ModelFiles:
    """Resolve ``model`` (and an optional explicit codec GGUF) to the two GGUF files.

    Raises:
        FileNotFoundError: nothing usable at ``model``, or a Hub id that cannot be downloaded.
    """
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise FileNotFoundError(f"{path} is not a .gguf file")
        files = ModelFiles(lm=path, codec=Path(codec)) if codec else _from_gguf_dir(path.parent, path)
    elif path.is_dir():
        if any(path.glob("omnivoice-base-*.gguf")):
            files = _from_gguf_dir(path)
        elif _is_snapshot(path):
            files = _convert_snapshot(path, convert_type)
        else:
            raise FileNotFoundError(
                f"{path} holds neither omnivoice GGUF files nor a Hugging Face snapshot "
                "(config.json and audio_tokenizer/)"
            )
    elif not path.is_absolute() and str(model).count("/") == 1 and not str(model).startswith("."):
        files = _convert_snapshot(_download(str(model)), convert_type)
    else:
        raise FileNotFoundError(f"model not found: {model}")
    if codec:
        files = ModelFiles(lm=files.lm, codec=Path(codec))
    if not files.codec.is_file():
        raise FileNotFoundError(f"codec GGUF not found: {files.codec}")
    return files
