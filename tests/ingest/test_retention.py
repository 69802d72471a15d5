"""Frame retention: thinning and dropping inside the Zarr store, readers that never see a deleted frame, the
storage maintainer's age rules and disk guard, and questions about spans whose frames have expired."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from lucy.config import Level, LucySettings, load_settings
from lucy.ingest import Clip, Ingestor, ZarrFrameStore, retention, zarr_store
from lucy.ingest.retention import RetentionMaintainer
from lucy.ingest.zarr_store import RETENTION_FILE, kept_mask
from lucy.memory.captioners.base import Captioner
from lucy.memory.nodes import Caption, MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.metrics import MetricsExporter
from lucy.query import QueryConfig, QueryEngine
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.synth import PALETTE, Scene, write_video
from lucy.wiring import open_frames


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("videos")
    colours = [PALETTE[c] for c in ("red", "green", "blue", "yellow", "purple", "teal")]

    def scenes(duration: float) -> list[Scene]:
        step = duration / len(colours)
        return [Scene(i * step, (i + 1) * step, c) for i, c in enumerate(colours)]

    return {
        "short": write_video(d / "short.mp4", duration=40, fps=8, width=320, height=180, scenes=scenes(40), seed=1),
        "other": write_video(d / "other.mp4", duration=40, fps=8, width=320, height=180, scenes=scenes(40), seed=2),
        "long": write_video(d / "long.mp4", duration=180, fps=4, width=320, height=180, scenes=scenes(180),
                            seed=3),
    }


def ingest(settings: LucySettings, source: Path, stream: str) -> ZarrFrameStore:
    result = Ingestor(settings, str(source), stream, frames=open_frames(settings)).run()
    assert result.complete and result.frames > 0
    return ZarrFrameStore.open(settings.data, stream)


def disk_bytes(store: ZarrFrameStore) -> int:
    """What the frame chunks really take (a full walk: only tests may afford it)."""
    return sum(f.stat().st_size for f in (store.path / "frames").rglob("*") if f.is_file() and f.name != "zarr.json")


def assert_no_black(clip: Clip) -> None:
    assert len(clip) == 0 or clip.frames.reshape(len(clip), -1).max(axis=1).min() > 0, "a deleted frame was read"


def assert_disk_matches_rule(store: ZarrFrameStore) -> None:
    """Every frame the retention record keeps is on disk, and no other is."""
    times = store._all_times()  # private: the test looks at every chunk, kept or not
    kept = kept_mask(times, 0, len(times), store.retention_state())
    on_disk = np.array([store._chunk_path(i).is_file() for i in range(len(times))])
    np.testing.assert_array_equal(on_disk, kept)


# ------------------------------------------------------------------------------------------------ the store


@pytest.mark.parametrize("layout", ["flat", "nested"])
def test_thin_and_drop_free_disk_and_reads_skip_deleted_frames(settings, videos, layout, monkeypatch):
    if layout == "nested":  # a store made before chunks lay side by side: c/<i>/0/0/0
        monkeypatch.setattr(zarr_store, "_CHUNK_KEYS", {"name": "default", "separator": "/"})
    store = ingest(settings, videos["short"], "s")
    reader = ZarrFrameStore.open(settings.data, "s")  # opened before retention: must notice it
    assert len(reader.read(0, 40)) == 80
    before = disk_bytes(store)
    assert store.stored_bytes() == before

    freed = store.thin_before(20.0, keep_fps=0.5)
    assert freed > 0 and disk_bytes(store) == before - freed == store.stored_bytes()
    times = reader.times()
    np.testing.assert_allclose(times[times < 20], np.arange(0, 20, 2.0))  # one frame per 2 s slot
    assert len(times[times >= 20]) == 40  # untouched after the boundary
    clip = reader.read(0, 40)
    assert len(clip) == 50
    assert_no_black(clip)
    sparse = reader.read(0, 20, fps=2.0)  # asking for more than is left gives what is left
    np.testing.assert_allclose(sparse.times, np.arange(0, 20, 2.0))
    assert_no_black(sparse)
    assert reader.info().thinned_before == 20.0 and reader.available_from() == 0.0

    freed_drop = store.drop_before(10.0)
    assert freed_drop > 0 and disk_bytes(store) == before - freed - freed_drop == store.stored_bytes()
    assert reader.available_from() == 10.0 and reader.info().expired_before == 10.0
    assert len(reader.read(0, 10)) == 0
    assert reader.times()[0] == 10.0
    clip = reader.read(0, 40, fps=0.5)
    assert clip.times[0] >= 10.0
    assert_no_black(clip)
    assert_disk_matches_rule(store)

    # The record lives beside zarr.json (which the writer owns) and carries the byte count to other processes.
    record = json.loads((store.path / RETENTION_FILE).read_text())
    assert record["dropped_before"] == 10.0 and record["bytes_freed"] == freed + freed_drop
    assert not {"dropped_before", "thinned"} & set(json.loads((store.path / "zarr.json").read_text())["attributes"])
    assert ZarrFrameStore.open(settings.data, "s").stored_bytes() == disk_bytes(store)

    # The newest committed frame is never deleted, whatever is asked.
    store.drop_before(1e9)
    assert len(reader.times()) == 1 and reader.times()[0] == 39.5
    assert_no_black(reader.read(0, 1e9))
    assert disk_bytes(store) == store.stored_bytes() > 0
    if layout == "flat":  # chunks side by side ("c.<i>.0.0.0"): nothing else but the array's metadata
        assert {p.name for p in (store.path / "frames").iterdir() if not p.name.startswith("c.")} == {"zarr.json"}
    else:  # emptied chunk folders go too
        assert not list((store.path / "frames" / "c").glob("1*"))


def test_a_crash_between_publishing_and_deleting_is_finished_later(settings, videos):
    store = ingest(settings, videos["short"], "s")
    total = store.stored_bytes()
    times = store._all_times()
    victims = [store._chunk_path(i) for i in range(len(times)) if times[i] < 15.0]
    saved = {p: p.read_bytes() for p in victims[::2]}
    freed = store.drop_before(15.0)
    for path, body in saved.items():  # as if the maintainer died after deleting every other chunk
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    record = json.loads((store.path / RETENTION_FILE).read_text())
    record["pending"] = [0, len(victims)]
    (store.path / RETENTION_FILE).write_text(json.dumps(record))

    owner = ZarrFrameStore.open(settings.data, "s")  # the next maintainer
    assert_no_black(owner.read(0, 40))  # readers already leave them out
    owner.thin_before(30.0, 0.5)
    assert all(not p.exists() for p in victims)
    assert owner.stored_bytes() == disk_bytes(owner)
    assert json.loads((store.path / RETENTION_FILE).read_text())["pending"] is None
    assert owner.retention_state().bytes_freed == total - owner.stored_bytes() >= freed


def test_reads_racing_retention_never_return_deleted_frames(settings, videos):
    store = ingest(settings, videos["short"], "s")
    reader = ZarrFrameStore.open(settings.data, "s")
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def read_forever() -> None:
        while not stop.is_set():
            for fps in (None, 2.0, 0.5):
                clip = reader.read(0, 40, fps)
                reads[0] += 1
                if len(clip) and clip.frames.reshape(len(clip), -1).max(axis=1).min() == 0:
                    problems.append(f"black frame among {clip.times.tolist()}")

    thread = threading.Thread(target=read_forever)
    thread.start()
    try:
        for t in np.arange(1.0, 39.0, 0.5):
            store.thin_before(float(t) + 10, 0.5)
            store.drop_before(float(t))
    finally:
        stop.set()
        thread.join()
    assert reads[0] > 0 and problems == []
    assert_disk_matches_rule(store)


def test_retention_beside_a_running_writer(tmp_path, videos):
    """The maintainer deletes while the writer appends: no chunk both write, every kept frame stays readable."""
    settings = load_settings(data=tmp_path / "data", **{"retention.full_seconds": 5.0, "retention.keep_seconds": 12.0,
                                                       "retention.min_free_bytes": 0})
    maintainer = RetentionMaintainer(settings, frames=open_frames(settings))
    done = threading.Event()
    result: list[object] = []

    def write() -> None:
        try:
            result.append(Ingestor(settings, str(videos["long"]), "w", frames=open_frames(settings)).run())
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    passes = 0
    while not done.wait(0.05):
        maintainer.run_once()
        passes += 1
    writer.join()
    maintainer.run_once()
    assert passes > 0 and result and result[0].complete  # type: ignore[attr-defined]
    store = ZarrFrameStore.open(settings.data, "w")
    info = store.info()
    assert info.frames == 360 and info.expired_before == pytest.approx(info.last_time - 12.0)
    assert info.thinned_before == pytest.approx(info.last_time - 5.0)
    clip = store.read(0, 1e9)
    assert_no_black(clip)
    assert_disk_matches_rule(store)
    assert store.stored_bytes() == disk_bytes(store)
    assert maintainer.stats.snapshot()[0]["w"] == disk_bytes(store)


# ------------------------------------------------------------------------------------------------ the maintainer


def test_age_rules_follow_the_newest_frame_and_per_stream_settings(tmp_path, videos, monkeypatch):
    monkeypatch.setattr(retention, "_STEP_FRAMES", 7)  # a long backlog is worked off in steps, within the pass
    settings = load_settings(data=tmp_path / "data", **{"retention.full_seconds": 10.0, "retention.keep_seconds": 20.0,
                                                       "retention.min_free_bytes": 0})
    ingest(settings, videos["short"], "a")
    ingest(settings, videos["other"], "b")
    own = settings.model_copy(update={"retention": settings.retention.model_copy(update={"keep_seconds": 0.0})})
    maintainer = RetentionMaintainer(settings, settings_for=lambda name: own if name == "b" else settings,
                                     frames=open_frames(settings))
    report = maintainer.run_once()
    a, b = (ZarrFrameStore.open(settings.data, n).info() for n in ("a", "b"))
    assert (a.expired_before, a.thinned_before) == (19.5, 29.5)  # newest frame at 39.5 s
    assert (b.expired_before, b.thinned_before) == (0.0, 29.5)  # its own rule: never dropped
    assert report.freed[("a", "expired")] > 0 and report.freed[("a", "thinned")] > 0
    assert ("b", "expired") not in report.freed
    again = maintainer.run_once()
    assert again.freed_bytes == 0  # nothing newer to apply: a pass costs a few stats


def test_guard_keeps_frame_bytes_under_max_bytes_oldest_first(tmp_path, videos):
    settings = load_settings(data=tmp_path / "data", **{"retention.min_free_bytes": 0})
    ingest(settings, videos["short"], "old")
    ingest(settings, videos["other"], "new")
    for name, wall_start in (("old", 1000.0), ("new", 1030.0)):  # as two cameras started 30 s apart
        ZarrFrameStore.open_writer(settings.data, name).set_wall_start(wall_start)
    sizes = {n: ZarrFrameStore.open(settings.data, n).stored_bytes() for n in ("old", "new")}
    bound = int(0.7 * sum(sizes.values()))
    settings = settings.model_copy(update={"retention": settings.retention.model_copy(update={"max_bytes": bound})})
    maintainer = RetentionMaintainer(settings, frames=open_frames(settings))
    exporter = MetricsExporter()
    exporter.retention = maintainer.stats
    report = maintainer.run_once()
    stores = {n: ZarrFrameStore.open(settings.data, n) for n in ("old", "new")}
    on_disk = sum(disk_bytes(s) for s in stores.values())
    assert on_disk <= bound and on_disk == sum(report.stored.values())
    assert stores["old"].available_from() > 0 and stores["new"].available_from() == 0.0  # the oldest went first
    assert not report.over_bound
    for store in stores.values():
        assert_no_black(store.read(0, 1e9))

    # A tiny bound: everything but each stream's newest frame goes, and the pass says the bound still fails.
    tiny = settings.model_copy(update={"retention": settings.retention.model_copy(update={"max_bytes": 1000})})
    maintainer.settings = tiny
    report = maintainer.run_once()
    assert report.over_bound and all(len(s.times()) == 1 for s in stores.values())

    exporter.update([])
    text = exporter.render().decode()
    assert 'lucy_frame_freed_bytes_total{reason="max_bytes",stream="old"}' in text
    stored = {line.split("}")[0]: float(line.split()[-1]) for line in text.splitlines()
              if line.startswith("lucy_frame_stored_bytes{")}
    assert stored == {f'lucy_frame_stored_bytes{{stream="{n}"': float(disk_bytes(s)) for n, s in stores.items()}
    assert "lucy_data_disk_free_bytes" in text


def _small_disk(monkeypatch: pytest.MonkeyPatch, *, total: int, free: int) -> None:
    """The data directory's disk as the maintainer sees it: ``total`` bytes, ``free`` of them free."""
    usage = shutil._ntuple_diskusage(total, total - free, free)  # what disk_usage returns
    monkeypatch.setattr(retention.shutil, "disk_usage", lambda _path: usage)


def test_default_floor_on_a_small_disk_deletes_nothing_and_says_so(tmp_path, videos, monkeypatch, caplog):
    settings = load_settings(data=tmp_path / "data")  # the defaults: a 1 GiB floor
    ingest(settings, videos["short"], "cam")
    _small_disk(monkeypatch, total=100_000_000, free=91_000_000)  # a 100 MB volume, 9 % used
    maintainer = RetentionMaintainer(settings, frames=open_frames(settings))
    with caplog.at_level("WARNING", logger="lucy.ingest.retention"):
        report = maintainer.run_once()
        maintainer.run_once()
    store = ZarrFrameStore.open(settings.data, "cam")
    assert report.freed_bytes == 0 and not report.over_bound and len(store.times()) == 80
    assert report.min_free == 10_000_000  # min(1 GiB, a tenth of the disk)
    said = [r.getMessage() for r in caplog.records if "min_free_bytes" in r.getMessage()]
    assert len(said) == 1 and "1073.7 MB" in said[0] and "100.0 MB" in said[0] and "10.0 MB" in said[0], said

    # The scaled floor still guards the disk: below it, the oldest frames go.
    _small_disk(monkeypatch, total=100_000_000, free=5_000_000)
    report = maintainer.run_once()
    assert report.freed[("cam", "min_free")] > 0 and store.available_from() > 0


def test_only_the_streams_named_are_maintained(tmp_path, videos):
    settings = load_settings(data=tmp_path / "data", **{"retention.full_seconds": 10.0, "retention.keep_seconds": 20.0,
                                                       "retention.max_bytes": 1000})
    ingest(settings, videos["short"], "served")
    ingest(settings, videos["other"], "ingested")  # as by `lucy ingest`: not in the server's stream list
    before = ZarrFrameStore.open(settings.data, "ingested").stored_bytes()
    report = RetentionMaintainer(settings, streams=lambda: {"served", "gone"}, frames=open_frames(settings)).run_once()
    served, ingested = (ZarrFrameStore.open(settings.data, n) for n in ("served", "ingested"))
    assert served.available_from() > 0 and report.freed_bytes > 0
    assert set(report.stored) == {"served"} and {s for s, _ in report.freed} == {"served"}
    info = ingested.info()
    assert (info.expired_before, info.thinned_before) == (0.0, 0.0) and len(ingested.times()) == 80
    assert disk_bytes(ingested) == before


def test_frames_not_yet_captioned_are_kept(tmp_path, videos):
    settings = load_settings(data=tmp_path / "data", **{"retention.full_seconds": 10.0, "retention.keep_seconds": 20.0,
                                                       "retention.max_bytes": 1000})
    ingest(settings, videos["long"], "cam")  # 180 s, no captions yet
    ingest(settings, videos["short"], "raw")  # recorded without a captioner: nothing would ever caption it
    memory = SQLiteMemoryStore.for_data(settings)
    try:
        raw = settings.model_copy(update={"captioner": settings.captioner.model_copy(update={"backend": "none"})})
        maintainer = RetentionMaintainer(settings, memory=memory,
                                         settings_for=lambda n: raw if n == "raw" else settings,
                                         frames=open_frames(settings))
        report = maintainer.run_once()
        store = ZarrFrameStore.open(settings.data, "cam")
        assert report.kept_from["cam"] == 0.0 and report.over_bound
        assert len(store.times()) == 360 and store.info().expired_before == 0.0  # nothing captioned: all kept
        assert ZarrFrameStore.open(settings.data, "raw").available_from() == 39.5  # only its newest frame left

        memory.add(MemoryNode(stream="cam", level="coarse", start=0.0, end=60.0, text="A red screen."))
        report = maintainer.run_once()
        info = store.info()
        assert report.kept_from["cam"] == 60.0
        assert info.expired_before == 60.0 and info.thinned_before == 60.0  # the rules stop at the captions' end
        times = store.times()
        assert times[0] == 60.0 and len(times) == 240  # every frame from 60 s on is kept whole (2 fps)
        assert_disk_matches_rule(store)
    finally:
        memory.close()


def test_settings_refuse_keep_below_full():
    with pytest.raises(ValidationError, match="keep_seconds"):
        load_settings(**{"retention.full_seconds": 100.0, "retention.keep_seconds": 50.0})
    assert load_settings(**{"retention.full_seconds": 100.0}).retention.keep_seconds == 0.0


def test_a_streams_own_ages_are_validated(tmp_path):
    from lucy.errors import InvalidStream
    from lucy.runtime.registry import StreamSpec
    from lucy.runtime.streams import stream_settings

    settings = load_settings(data=tmp_path, **{"retention.full_seconds": 600.0, "retention.keep_seconds": 3600.0})
    spec = StreamSpec(name="cam", source="/x.mp4", preset="live", captioner="none", retention_keep_seconds=7200.0)
    own = stream_settings(settings, spec).retention
    assert (own.full_seconds, own.keep_seconds) == (600.0, 7200.0)
    assert settings.retention.keep_seconds == 3600.0
    with pytest.raises(InvalidStream, match="keep_seconds"):
        stream_settings(settings, StreamSpec(name="cam", source="/x.mp4", preset="live", captioner="none",
                                             retention_keep_seconds=60.0))


# ------------------------------------------------------------------------------------------------ questions


@dataclass
class CountingCaptioner(Captioner):
    calls: list[Clip] = field(default_factory=list)
    name: str = "counting"
    model: str = "counting-eye"

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        self.calls.append(clip)
        return Caption(text=f"{level.value} clip of {len(clip)} frames", model=self.model, frames=len(clip))


def _ask(settings: LucySettings, captioner: CountingCaptioner):
    store = ZarrFrameStore.open(settings.data, "cam")
    memory = SQLiteMemoryStore.for_data(settings)
    try:
        texts = ["A delivery van waits at the loading gate.", "An empty corridor.", "A quiet parking lot."]
        for k, text in enumerate(texts):
            memory.add(MemoryNode(stream="cam", level="coarse", start=60.0 * k, end=60.0 * (k + 1), text=text))
        engine = QueryEngine(frames=store, memory=memory, reasoner=LexicalReasoner(), captioner=captioner,
                             preset=settings.levels, config=QueryConfig(max_iterations=1, init_spans=1, neighbours=0))
        return asyncio.run(engine.ask("What colour was the delivery van at the loading gate?",
                                      ["red", "silver", "black"]))
    finally:
        memory.close()


def test_a_question_about_expired_frames_answers_from_memory_without_captions(tmp_path, videos):
    settings = load_settings(data=tmp_path / "data", **{"captioner.backend": "none"})
    store = ingest(settings, videos["long"], "cam")
    store.drop_before(120.0)
    captioner = CountingCaptioner()
    result = _ask(settings, captioner)
    assert captioner.calls == [] and result.caption_calls == 0
    assert "frames before 120 s have expired (retention)" in result.errors
    searched = [s for s in result.trace if s.agent == "caption"]
    assert searched and all(s.start < 120 and "expired" in (s.error or "") for s in searched)
    assert result.answer and result.trace[-1].agent == "final"  # still answered, from memory


def test_a_thinned_span_is_captioned_from_the_frames_left(tmp_path, videos):
    settings = load_settings(data=tmp_path / "data", **{"captioner.backend": "none"})
    store = ingest(settings, videos["long"], "cam")
    store.thin_before(120.0, 0.5)
    captioner = CountingCaptioner()
    result = _ask(settings, captioner)
    assert result.caption_calls == len(captioner.calls) > 1
    for clip in captioner.calls:
        assert clip.times.max() < 60.0 and np.all(np.diff(clip.times) >= 2.0 - 1e-6)  # what thinning left
        assert_no_black(clip)
    assert not any("expired" in e for e in result.errors)
    assert os.path.exists(store.path / RETENTION_FILE)


def test_the_builder_says_when_frames_expired_before_they_were_captioned(tmp_path, videos):
    from lucy.memory.builder import CoarseBuilder

    settings = load_settings(data=tmp_path / "data")
    store = ingest(settings, videos["long"], "cam")
    store.drop_before(120.0)  # the builder fell behind retention
    memory = SQLiteMemoryStore.for_data(settings)
    captioner = CountingCaptioner()
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        assert builder.drain(timeout=60)
    texts = {(n.start, n.end): n.text for n in memory.nodes("cam", level="coarse")}
    memory.close()
    assert texts[(0.0, 60.0)] == "The frames from 0.0 s to 60.0 s expired (retention) before they were captioned."
    assert "expired" in texts[(60.0, 120.0)]
    assert len(captioner.calls) == 1 and captioner.calls[0].times.min() >= 120.0
    assert_no_black(captioner.calls[0])
