"""Thread counts: checked and capped at the usable cores; the load-aware default; results that do
not depend on the count (so changing it between steps keeps generation reproducible)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omnivoice import AudioTokenizer, OmniVoice
from omnivoice.threads import LoadAwareThreads, resolve_n_threads, usable_cores


@pytest.mark.parametrize(("value", "error"), [("2", TypeError), (2.0, TypeError), (True, TypeError),
                                              (0, ValueError), (-1, ValueError)])
def test_bad_thread_counts_are_refused_by_name(value: object, error: type) -> None:
    with pytest.raises(error, match="n_threads"):
        resolve_n_threads(value)  # type: ignore[arg-type]


def test_thread_count_is_capped_at_usable_cores() -> None:
    assert resolve_n_threads(None) is None
    assert resolve_n_threads(1) == 1
    with pytest.warns(UserWarning, match=f"{usable_cores()} usable cores"):
        assert resolve_n_threads(usable_cores() + 600) == usable_cores()


def test_models_cap_thread_counts(tiny_model_dir: Path) -> None:
    with pytest.warns(UserWarning, match="usable cores"):
        model = OmniVoice.from_pretrained(tiny_model_dir, n_threads=600)
    assert model.n_threads == usable_cores()
    with pytest.raises(TypeError, match="n_threads"):
        model.n_threads = "2"  # type: ignore[assignment]
    with pytest.warns(UserWarning, match="usable cores"):
        tok = AudioTokenizer.from_file(tiny_model_dir / "omnivoice-tokenizer-F32.gguf", n_threads=600)
    del tok


class ScriptedLoad(LoadAwareThreads):
    """Load-aware threads on 4 cores fed with scripted (wall s, our CPU s, busy ticks) samples."""

    def __init__(self, samples: list[tuple[float, float, int]]) -> None:
        super().__init__(4)
        self._cpus = {0, 1, 2, 3}
        self._tick = 100
        self._samples = iter(samples)

    def _sample(self) -> tuple[float, float, int]:
        return next(self._samples)


def test_load_aware_count_uses_the_cores_others_leave() -> None:
    # 1 s windows: we use 4 cores of CPU and nobody else does; then others take 1.5 cores (150
    # ticks beyond ours); then 3.6 cores; then they stop.
    load = ScriptedLoad([(0, 0, 0), (1, 4, 400), (2, 6.5, 800), (3, 7.4, 1250), (4, 8.4, 1350)])
    assert [load.update() for _ in range(5)] == [4, 4, 2, 1, 4]


def test_load_aware_count_waits_for_a_long_enough_window() -> None:
    # Windows under 0.25 s are mostly tick rounding: the count holds until one is long enough.
    load = ScriptedLoad([(0, 0, 0), (0.1, 0.1, 300), (0.3, 0.3, 330)])
    assert [load.update() for _ in range(3)] == [4, 4, 1]


def test_generation_does_not_depend_on_thread_count(tiny_model_dir: Path) -> None:
    model = OmniVoice.from_pretrained(tiny_model_dir, n_threads=1)
    args = dict(text="Hello there.", duration=0.6, num_step=4, seed=3)
    one = model.generate(**args)[0]
    model.n_threads = min(2, usable_cores())
    np.testing.assert_array_equal(model.generate(**args)[0], one)
    model.n_threads = None  # load-aware
    np.testing.assert_array_equal(model.generate(**args)[0], one)
