"""Mutated model, codes, voice and audio files, each loaded and used in a worker process: every
outcome is a success or a clean exception (fuzz.py beside this file; scripts/fuzz.sh runs it for
longer)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fuzz  # noqa: E402

# Values for the header numbers that size allocations: the crash was block_count 2^31-1.
EXTREMES = [0, 2**31 - 1, 10**8]


@pytest.fixture(scope="module")
def seeds(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> fuzz.Seeds:
    return fuzz.make_seeds(tiny_model_dir, tmp_path_factory.mktemp("seeds"))


def failures(results: list[dict]) -> list[str]:
    return [f"{r['outcome']}: {Path(r['path']).name} {r.get('what', '')}: {r['detail']}"
            for r in results if r["outcome"] not in ("ok", "clean")]


def test_gguf_header_numbers_at_extremes(seeds: fuzz.Seeds, tiny_model_dir: Path, tmp_path: Path) -> None:
    # Every metadata number of both GGUFs (and the counts), plus a fixed sample of tensor fields.
    cases = []
    rng = random.Random(0)
    for kind in ("lm", "codec"):
        data = getattr(seeds, kind)
        spans = fuzz.gguf_number_spans(data)
        # Metadata numbers (scalars, array counts; not key/string lengths, types or array items).
        meta = [s for s in spans if not s[2].startswith(("tensor ", "key ")) and "[" not in s[2]
                and not s[2].endswith((" type", " length"))]
        tensor = rng.sample([s for s in spans if s[2].startswith("tensor ") and " n" in s[2]], 10)
        for i, span in enumerate(meta + tensor):
            for value in EXTREMES:
                path = tmp_path / f"{kind}-{i}-{value}.gguf"
                path.write_bytes(fuzz.set_number(data, span, value))
                cases.append({"kind": kind, "path": str(path), "what": f"{span[2]} = {value}"})
    results = fuzz.run_cases(cases, tiny_model_dir, tmp_path)
    assert len(results) == len(cases)
    assert not failures(results), "\n".join(failures(results))


def test_random_mutants(seeds: fuzz.Seeds, tiny_model_dir: Path, tmp_path: Path) -> None:
    cases = fuzz.write_mutants(seeds, tmp_path, 40, seed=1)
    results = fuzz.run_cases(cases, tiny_model_dir, tmp_path)
    assert len(results) == len(cases)
    assert not failures(results), "\n".join(failures(results))


def test_invalid_utf8_metadata_names_file_and_key(tiny_model_dir: Path, tmp_path: Path) -> None:
    from omnivoice import AudioTokenizer, ModelFormatError

    data = (tiny_model_dir / "omnivoice-tokenizer-F32.gguf").read_bytes()
    key = b"omnivoice.semantic.feat_extract_norm"
    value = data.index(key) + len(key) + 4 + 8  # after the key: value type (4), string length (8)
    path = tmp_path / "bad.gguf"
    path.write_bytes(data[:value] + b"\xffroup" + data[value + 5 :])
    with pytest.raises(ModelFormatError, match="bad.gguf: metadata key omnivoice.semantic.feat_extract_norm"):
        AudioTokenizer.from_file(path, n_threads=1)


def test_encoder_file_needs_its_semantic_rate_at_load(tiny_model_dir: Path, tmp_path: Path) -> None:
    from omnivoice import AudioTokenizer, ModelFormatError

    data = (tiny_model_dir / "omnivoice-tokenizer-F32.gguf").read_bytes()
    path = tmp_path / "no-rate.gguf"  # the key renamed: the file lacks it
    path.write_bytes(data.replace(b"omnivoice.semantic_sample_rate", b"omnivoice.semantic_sample_ratX"))
    with pytest.raises(ModelFormatError, match="missing metadata key omnivoice.semantic_sample_rate"):
        AudioTokenizer.from_file(path, n_threads=1)
