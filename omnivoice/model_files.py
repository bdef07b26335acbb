"""Find the two GGUF files of a model from what a user passes as ``model``.

Accepted: the LM GGUF itself (the codec GGUF is looked up beside it), a directory holding both
GGUFs, a Hugging Face snapshot directory of ``k2-fsa/OmniVoice`` (converted once into a cache), or
a Hub id: of that snapshot (downloaded with ``huggingface_hub``, then converted) or of a repository
of GGUFs (the LM of the wanted type and the codec are downloaded). The GGUFs may be ours or
omnivoice.cpp's: their LM loads as it is, their codec is converted once into the cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

logger = logging.getLogger(__name__)

# When a directory holds several LM files, the first type found here wins.
LM_TYPE_PREFERENCE = ("BF16", "Q8_0", "F16", "Q4_K_M", "F32")
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


def codec_in_our_layout(codec: Path) -> Path:
    """``codec`` itself, or for an omnivoice.cpp codec its conversion (made once) in the cache."""
    from .convert.omnivoice.omnivoice_cpp import convert_cpp_codec, is_cpp_codec

    if not is_cpp_codec(codec):
        return codec
    st = codec.stat()
    ident = f"{codec.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    out = cache_dir() / "converted" / hashlib.sha256(ident.encode()).hexdigest()[:16] / codec.name
    if not out.exists():
        logger.info("converting omnivoice.cpp codec %s to our layout in %s, once", codec, out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".part")
        convert_cpp_codec(codec, tmp)
        os.replace(tmp, out)
    return out


def _hub_module() -> ModuleType:
    try:
        import huggingface_hub
    except ImportError as e:
        raise FileNotFoundError(
            "huggingface_hub is not installed to download from the Hub: pip install huggingface_hub, "
            "or pass a directory of GGUFs (see omnivoice-convert)"
        ) from e
    return huggingface_hub


def _download(repo_id: str, lm_type: str) -> Path:
    """The downloaded repository: everything but GGUFs; if that is no snapshot, the GGUFs wanted.

    A repository of GGUFs (omnivoice.cpp publishes one per LM type) gives only
    ``omnivoice-base-<lm_type>.gguf`` and the codec, not every type.
    """
    hub = _hub_module()
    try:
        path = Path(hub.snapshot_download(repo_id, ignore_patterns=["*.gguf"]))
        if not _is_snapshot(path):
            patterns = [f"omnivoice-base-{lm_type}.gguf", "omnivoice-tokenizer-*.gguf"]
            path = Path(hub.snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as e:  # network errors come in many types
        raise FileNotFoundError(
            f"could not download {repo_id!r} from the Hugging Face Hub ({type(e).__name__}: {e}). "
            "Offline, pass the GGUF files or a directory holding them, or a local snapshot directory"
        ) from e
    if not _is_snapshot(path) and not (path / f"omnivoice-base-{lm_type}.gguf").is_file():
        raise FileNotFoundError(
            f"{repo_id!r} holds neither a k2-fsa/OmniVoice snapshot nor omnivoice-base-{lm_type}.gguf "
            "(choose another LM type)"
        )
    return path


def resolve_model(model: str | os.PathLike[str], codec: str | os.PathLike[str] | None = None,
                  convert_type: str = DEFAULT_CONVERT_TYPE) -> ModelFiles:
    """Resolve ``model`` (and an optional explicit codec GGUF) to the two GGUF files.

    ``convert_type`` is the LM type a snapshot is converted to, or downloaded from a Hub
    repository of GGUFs. An omnivoice.cpp codec is replaced by its conversion in the cache.

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
        repo = _download(str(model), convert_type)
        if _is_snapshot(repo):
            files = _convert_snapshot(repo, convert_type)
        else:
            files = _from_gguf_dir(repo, repo / f"omnivoice-base-{convert_type}.gguf")
    else:
        raise FileNotFoundError(f"model not found: {model}")
    if codec:
        files = ModelFiles(lm=files.lm, codec=Path(codec))
    if not files.codec.is_file():
        raise FileNotFoundError(f"codec GGUF not found: {files.codec}")
    return ModelFiles(lm=files.lm, codec=codec_in_our_layout(files.codec))
