"""Mutated model, codes, voice and audio files, each loaded and used in a worker process: every
outcome is a success or a clean exception (tests/fuzz.py; scripts/fuzz.sh runs it for longer)."""

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
