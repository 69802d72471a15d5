"""The decoder -> writer hand-off of an ingest, when the writer goes away (Ctrl-C, a failing store).

Found while testing `lucy ingest` under signals: the decoder thread used to block forever on a full queue once
the writer had stopped taking frames, and the run then waited out a 30 s join. It matters for live ingest and
files alike; a file shows it reliably, because its decoder outruns the writer.
"""

from __future__ import annotations

import time

import pytest

from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.synth import write_video
from lucy.wiring import open_frames


class WriterFailed(Exception):
    pass


def test_a_failing_writer_ends_the_run_promptly(tmp_path, live):
    video = write_video(tmp_path / "v.mp4", duration=20.0, fps=15, width=320, height=240, gop=15)
    settings = live.settings(tmp_path / "data", commit_every_frames=4)
    commits: list[int] = []

    def on_commit(store: ZarrFrameStore, stats) -> None:
        commits.append(stats.committed)
        raise WriterFailed("the writer gives up after its first commit")

    ingestor = Ingestor(settings, str(video), "v", on_commit=on_commit, frames=open_frames(settings))
    started = time.monotonic()
    with pytest.raises(WriterFailed):
        ingestor.run()
    assert time.monotonic() - started < 10  # not the decoder's 30 s join timeout
    assert commits == [4]
    assert ZarrFrameStore.open(settings.data, "v").committed() == 4  # what was committed stays
