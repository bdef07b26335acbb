"""SubRip parsing (tolerant input, errors naming the line) and cue placement on the timeline."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice.subtitles import Timeline, parse_srt

SRT = ("\ufeff1\r\n00:00:00,500 --> 00:00:01,250\r\n<i>Hello</i> {\\an8}there,\r\nfriend.\r\n\r\n"
       "3\n00:00:03.000 --> 00:00:04,000 X1:10 X2:20\nLast one.\n\n\n"
       "2\n00:00:01,500 --> 00:00:03,5\nSecond.\n\n"
       "00:00:05,000 --> 00:00:06,000\n<b></b>\n")


def test_tolerant_parse_sorted_with_markup_removed() -> None:
    cues = parse_srt(SRT)
    assert [(c.index, c.start, c.end, c.text, c.line) for c in cues] == [
        (1, 0.5, 1.25, "Hello there, friend.", 2),
        (2, 1.5, 3.5, "Second.", 12),
        (3, 3.0, 4.0, "Last one.", 7),
    ]  # the cue with no spoken text is dropped


@pytest.mark.parametrize("text, message", [
    ("1\n00:00:01,000 -> 00:00:02,000\nHi.\n", "x.srt:1: expected a cue number and a timing line"),
    ("1\n00:00:01,000 --> 00:00:2\nHi.\n", "x.srt:2: malformed timing '00:00:01,000 --> 00:00:2'"),
    ("\n\n7\n00:00:02,000 --> 00:00:01,000\nHi.\n", "x.srt:4: cue ends at 1.000 s, not after its start 2.000 s"),
    ("1\n00:00:01,000 --> 00:00:02,000\n<i></i>\n", "x.srt: no subtitle cues with text"),
    ("", "x.srt: no subtitle cues"),
])
def test_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_srt(text, "x.srt")


def test_clips_are_placed_clipped_at_the_next_cue_and_faded() -> None:
    cues = parse_srt(SRT)
    timeline = Timeline(cues, 1000)
    assert timeline.audio.size == 4000
    for i, seconds in enumerate([1.0, 2.0, 1.5]):  # the second runs past the third's start
        timeline.place(i, np.ones(int(seconds * 1000), np.float32))
    a = timeline.audio
    assert a[:500].max() == 0 and a[1500] == 0 and a[1510] == 1
    assert a[1400:1500].max() == 1  # the first clip lasts 1 s: into the gap before cue 2
    assert a[2999] < 0.2 and a[2989] == 1  # cue 2 clipped and faded out at cue 3's start
    assert a[3000] == 0 and a[3500] == 1 and a[3999] == 0  # cue 3 faded in, clipped at the end
