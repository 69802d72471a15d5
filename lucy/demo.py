"""``lucy demo``: Lucy end to end on the embedded backends, no model and no GPU needed.

It generates a 90-second video with details worth asking about (a van's plate, a departure board, boxes), ingests
it paced in real time as if it were a live camera while the coarse builder captions it (pixels captioner), asks
questions while ingestion goes on (lexical reasoner), and prints each answer with the trace of how the loop got
there. At the end, one question is asked again to show that what the first ask found is reused.

What it stores stays where a user looks next: the stream ``demo`` in the data directory (``./lucy-data``, or
``--data``), so that ``lucy streams`` and ``lucy ask ... --stream demo`` work afterwards from the same folder. Each
run replaces the ``demo`` stream (its frames and memory) with a new recording: its questions are asked while it
records. Only the generated video is temporary.
"""

from __future__ import annotations

import asyncio
import shlex
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from lucy.backends import Backends, builder_captioner, builder_embedder, builder_transcriber
from lucy.config import LucySettings
from lucy.ingest.lock import stream_lock
from lucy.memory.nodes import INGEST_ORIGIN
from lucy.memory.store import MemoryStore
from lucy.query.console import answer_lines
from lucy.recorder import Recording, StreamRecorder
from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine

STREAM = "demo"
DEMO_SECONDS = 90.0
WIDTH, HEIGHT = 320, 180  # small frames keep OCR quick on a laptop

# (ask once this much media is ingested, question, options)
QUESTIONS: list[tuple[float, str, list[str]]] = [
    (22.0, "What was the plate number of the delivery van?", ["KX-4281", "KX-4821", "QD-1190", "MV-3375"]),
    (55.0, "At what time does the train from platform 7 depart?", ["13:50", "14:05", "14:50", "15:05"]),
    (88.0, "How many orange boxes were shown at the store?", ["2", "3", "4", "5"]),
]


def demo_video(path: Path) -> Path:
    """90 s in three scenes. Big signs (readable in coarse memory) say where; small print (readable only by
    looking closer) holds the details: the van's plate, the departure time, three orange boxes."""
    scenes = [Scene(0, 30, PALETTE["blue"]), Scene(30, 60, PALETTE["green"]),
              Scene(60, DEMO_SECONDS, PALETTE["purple"])]
    overlays = [
        Overlay(5, 15, "DELIVERY VAN", size=0.12, x=0.05, y=0.06),
        Overlay(5, 15, "VAN PLATE KX-4821", size=0.06, x=0.05, y=0.42),
        Overlay(35, 48, "PLATFORM 7", size=0.12, x=0.05, y=0.06),
        Overlay(35, 48, "TRAIN DEPARTS 14:05", size=0.06, x=0.05, y=0.42),
        Overlay(66, 80, "STORE", size=0.12, x=0.05, y=0.06),
        Overlay(66, 80, "CLOSES AT 9 PM", size=0.06, x=0.05, y=0.42),
    ]
    shapes = [Shape(66, 80, PALETTE["orange"], count=3, x=0.05, y=0.62, size=0.1)]
    return write_video(path, duration=DEMO_SECONDS, fps=10, width=WIDTH, height=HEIGHT, scenes=scenes,
                       overlays=overlays, shapes=shapes)


def demo_settings(settings: LucySettings) -> LucySettings:
    """The user's settings (their data directory too), on the embedded backends and small frames."""
    return settings.model_copy(update={
        "ingest": settings.ingest.model_copy(update={"frame_width": WIDTH, "frame_height": HEIGHT}),
        "captioner": settings.captioner.model_copy(update={
            "backend": "pixels", "pixels": settings.captioner.pixels.model_copy(update={"coarse_max_frames": 8})}),
        "reasoner": settings.reasoner.model_copy(update={"backend": "lexical"}),
    })


class _Recording:
    """The demo's recording, on a thread of its own while the questions are asked."""

    def __init__(self, recorder: StreamRecorder) -> None:
        self.recorder = recorder
        self.ended: Recording | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="demo-recording", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.ended = self.recorder.run()
        except BaseException as err:  # noqa: BLE001  (raised again on the questions' side: check())
            self.error = err

    def ingested(self) -> float:
        return self.recorder.progress().ingest.ingested_until

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    async def reach(self, media_seconds: float) -> None:
        """Wait until ``media_seconds`` of video are stored (or the recording has ended)."""
        while self.ingested() < media_seconds and self.thread.is_alive():
            await asyncio.sleep(0.2)
        self.check()


async def _ask(settings: LucySettings, memory: MemoryStore, backends: Backends, question: str,
               options: list[str]) -> None:
    print(f"\n? {question}")
    for i, option in enumerate(options):
        print(f"    {i}. {option}")
    async with open_engine(settings, STREAM, memory=memory, backends=backends) as engine:
        run = engine.run(question, options)
        async for step in run:
            if step.agent != "done":
                print("  " + step.line(), flush=True)
        assert run.result is not None
        print("\n".join("  => " + line for line in answer_lines(run.result)), flush=True)


async def _questions(settings: LucySettings, memory: MemoryStore, recording: _Recording) -> None:
    """Ask the questions while the video is recorded, then the first one again; one event loop and one set of
    backends for all of them."""
    began = time.monotonic()
    backends = Backends()
    try:
        for at, question, options in QUESTIONS:
            await recording.reach(at)
            print(f"\n[{time.monotonic() - began:5.1f} s wall, {recording.ingested():5.1f} s of video ingested]",
                  end="")
            await _ask(settings, memory, backends, question, options)
        await asyncio.to_thread(recording.thread.join)  # ingest, then the last captions
        recording.check()
        print(f"\ningest finished after {time.monotonic() - began:.1f} s; coarse memory: "
              f"{memory.count(STREAM, level='coarse', origin=INGEST_ORIGIN)} spans. Asking the first question again "
              f"(what it found is in memory now, so nothing needs captioning):")
        await _ask(settings, memory, backends, QUESTIONS[0][1], QUESTIONS[0][2])
    finally:
        await backends.aclose()


def replace_stream(settings: LucySettings, memory: MemoryStore) -> bool:
    """Delete a ``demo`` stream an earlier run left (frames and memory); True if there was one. Refused
    (:class:`lucy.ingest.lock.LockHeld`, which says who) while another process records it."""
    frames = open_frames(settings)
    had = frames.exists(STREAM) or STREAM in memory.streams()
    if had:
        with stream_lock(settings.data, STREAM).acquire(wait_seconds=0.5):  # no writer starts meanwhile
            frames.delete(STREAM)
        memory.delete_stream(STREAM)
    return had


def hints(flags: Sequence[str]) -> list[str]:
    """The commands to try next, as short as they can be: with the user's own ``flags`` (``--data``, ``--config``)
    alone, if any (without them this shell finds the same data directory again: ./lucy-data, $LUCY_DATA or
    lucy.toml's)."""
    # The full path of this lucy when the shell would not find it (no activated virtual environment).
    from lucy.shell import lucy_command

    where = "".join(" " + shlex.quote(f) for f in flags)
    question = shlex.quote(QUESTIONS[0][1])
    return [f"{lucy_command()} streams{where}", f"{lucy_command()} memory --stream {STREAM}{where}",
            f"{lucy_command()} ask {question} --stream {STREAM}{where}"]


def run_demo(settings: LucySettings, *, flags: Sequence[str] = (), realtime: bool = True) -> int:
    """The demo on ``settings``' data directory (``flags``: the ``--data`` and ``--config`` the user gave, repeated
    in the hints)."""
    settings = demo_settings(settings)
    memory = open_memory(settings)
    try:
        if replace_stream(settings, memory):
            print(f"replacing the stream {STREAM!r} of an earlier demo in {settings.data}")
        with tempfile.TemporaryDirectory(prefix="lucy-demo-") as workdir:
            video = demo_video(Path(workdir) / "demo.mp4")
            print(f"generated a {DEMO_SECONDS:.0f} s video ({WIDTH}x{HEIGHT}, H.264): a van's plate at 5-15 s, a "
                  f"departure board at 35-48 s, a store sign with three orange boxes at 66-80 s")
            print(f"ingesting it as stream {STREAM!r} into {settings.data} "
                  f"{'paced in real time, like a live camera' if realtime else 'as fast as possible'}, with coarse "
                  f"captions every {settings.levels.coarse.span_seconds:g} s (pixels captioner); questions are "
                  f"answered by the lexical reasoner while ingestion goes on")
            recorder = StreamRecorder(settings, str(video), STREAM, memory, builder_captioner(settings),
                                      realtime=realtime, drain_timeout=120,
                                      transcriber=builder_transcriber(settings), embedder=builder_embedder(settings),
                                      frames=open_frames(settings))
            recording = _Recording(recorder)
            try:
                asyncio.run(_questions(settings, memory, recording))
            finally:
                recorder.stop()
                recording.thread.join(timeout=60)
    finally:
        memory.close()
    first, *others = hints(flags)
    print(f"\nstream {STREAM!r} kept in {settings.data}\ntry: {first}" + "".join(f"\n or: {h}" for h in others))
    return 0
