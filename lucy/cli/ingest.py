"""``lucy ingest``: record a file or a live stream into the data directory, with its coarse captions."""

from __future__ import annotations

import json
import shlex
import signal
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from lucy.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    ConfigOption,
    DataOption,
    PresetOption,
    StreamOption,
    VerboseOption,
    error_line,
    load,
    note,
    stderr_console,
)
from lucy.config import CaptionerBackend
from lucy.errors import LucyError, is_disk_full
from lucy.shell import lucy_command

if TYPE_CHECKING:
    from lucy.config import LucySettings
    from lucy.memory.store import MemoryStore
    from lucy.recorder import Recording

CaptionerOption = Annotated[CaptionerBackend | None, typer.Option(
    "--captioner", show_default=False,
    help="Backend that captions coarse memory while ingesting (default: captioner.backend).")]


def ingest(source: Annotated[str, typer.Argument(metavar="SOURCE", show_default=False,
                                                      help="Video file, rtsp://, http(s):// (HLS too).")],
           stream: StreamOption,
           realtime: Annotated[bool, typer.Option("--realtime", help="Pace a file like a live stream.")] = False,
           as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary at the end.")] = False,
           captioner: CaptionerOption = None,
           record: Annotated[bool | None, typer.Option(
               "--record/--no-record", show_default=False,
               help="Keep a live stream's original video as MP4 segments, for clips (default: recording.enabled).")]
           = None,
           data: DataOption = None, config: ConfigOption = None,
           preset: PresetOption = None, verbose: VerboseOption = 0) -> int:
    """Decode a file or live stream into the frame store and caption it into memory.

    A live stream runs until Ctrl-C (exit 130) or SIGTERM (exit 0); what was stored is kept either way.
    The next run on the same source and stream resumes after it.
    """
    settings = load(data, config, preset, verbose, **{"captioner.backend": captioner, "recording.enabled": record})
    if "://" in source:
        from lucy.ingest.source import split_source_url

        split_source_url(source)  # a URL that cannot be split is refused before any store is opened
    from lucy.backends import builder_captioner, builder_embedder, builder_transcriber
    from lucy.cli.progress import BarProgress, PlainProgress, file_duration
    from lucy.memory.nodes import INGEST_ORIGIN
    from lucy.recorder import StreamRecorder
    from lucy.wiring import open_frames, open_memory

    console = stderr_console()
    duration = file_duration(source)
    shown = BarProgress(stream, duration, console, realtime=realtime) if console.is_terminal else None
    observer = shown or PlainProgress(stream, duration, realtime=realtime)
    interrupted = False
    memory = open_memory(settings)
    try:
        recorder = StreamRecorder(settings, source, stream, memory, builder_captioner(settings), realtime=realtime,
                                  observer=observer, transcriber=builder_transcriber(settings),
                                  embedder=builder_embedder(settings), frames=open_frames(settings))

        def terminate(signum: int, _frame: object) -> None:
            # Stop cleanly: frames already decoded are committed and the summary printed.
            nonlocal interrupted
            recorder.stop()
            if signum == signal.SIGINT:
                interrupted = True
                signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C aborts at once

        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGINT, terminate)
        try:
            with shown or nullcontext():  # the bars show while it runs
                recording = recorder.run()
        except KeyboardInterrupt:
            recorder.stop()
            note("interrupted; everything committed so far is kept")
            return EXIT_INTERRUPTED
        coarse_nodes = memory.count(stream, level="coarse", origin=INGEST_ORIGIN)
        captioned_until = memory.captioned_until(stream)
        state = _stored_state(settings, stream, recording)
    except Exception as err:
        if not is_disk_full(err):
            raise
        # What was committed before the disk filled is consistent: say what it is and that a rerun resumes.
        raise LucyError(_disk_full(settings, stream, memory)) from None
    finally:
        memory.close()
    code = _summary(recording, coarse_nodes, captioned_until, state, as_json=as_json,
                    data_flag="" if data is None else f" --data {shlex.quote(str(data))}")
    if interrupted:
        note("interrupted; everything committed so far is kept")
        return EXIT_INTERRUPTED
    return code


def _disk_full(settings: LucySettings, stream: str, memory: MemoryStore) -> str:
    """The one line for a recording that stopped on a full disk: what is kept, and how to go on."""
    from lucy.wiring import open_frames

    try:
        info = open_frames(settings).open(stream).info()
        frames = f"{info.frames} frames up to {info.last_time or 0.0:.1f} s are stored" if info.frames else \
            "no frames are stored"
    except LucyError:
        frames = "no frames are stored"
    try:
        until = memory.captioned_until(stream)
        captions = f"coarse captions cover 0-{until:.1f} s" if until else "no coarse captions yet"
    except Exception:  # noqa: BLE001  (the memory store may be what failed: the line is said without it)
        captions = "the captions stored so far are kept"
    return (f"the disk of the data directory {settings.data} is full: {frames}, {captions}; free some space and "
            f"run the same command again: it resumes after what is kept")


def _stored_state(settings: LucySettings, stream: str, recording: Recording) -> str:
    """The stream's state now that this run has ended, read as ``lucy streams`` and the API read it (its store and
    its writer lock, released by now): ``finished``, ``stopped`` (a live stream stopped with Ctrl-C) or ``failed``.
    A stream whose store was never made (the source did not open) says how the run ended."""
    from lucy.runtime.status import stored_stream_state
    from lucy.wiring import open_frames

    try:
        return stored_stream_state(settings.data, open_frames(settings).open(stream).info()).value
    except LucyError:
        return recording.outcome.value


def _summary(recording: Recording, coarse_nodes: int, captioned_until: float, state: str, *, as_json: bool,
             data_flag: str = "") -> int:
    """Print how the recording ended (``state``: the stream's state now); returns the exit code."""
    from lucy.recorder import Backlog

    result, left = recording.ingest, recording.uncaptioned
    if as_json:
        print(json.dumps({"stream": result.stream, "state": state, "frames": result.frames,
                          "media_seconds": round(result.media_seconds, 3),
                          "wall_seconds": round(result.wall_seconds, 3),
                          "new_frames": result.new_frames, "complete": result.complete, "lost": result.lost,
                          "decode_errors": result.decode_errors, "reconnects": result.reconnects,
                          "coarse_nodes": coarse_nodes, "captioned_until": round(captioned_until, 3),
                          "coarse_pending": left}))
    else:
        print(f"{result.stream}: {state}; {result.new_frames} new frames, {result.frames} stored, "
              f"{result.media_seconds:.1f} s of media in {result.wall_seconds:.1f} s; "
              f"{coarse_nodes} coarse captions, captioned until {captioned_until:.1f} s")
    code = 0
    if result.lost:
        error_line(f"{result.lost} (the frames before it are stored)")
        code = EXIT_ERROR
    if recording.backlog in (Backlog.CAPTIONER_DOWN, Backlog.TIMED_OUT):
        reason = recording.last_caption_error or "it made no progress"
        error_line(f"captioner unavailable ({reason}); {left} coarse spans left uncaptioned (they are captioned on "
                   "the next run)")
        code = EXIT_ERROR
    elif left:
        note(f"{left} coarse spans not captioned yet (they are captioned on the next run)")
    elif not as_json and coarse_nodes and sys.stderr.isatty():
        note(f"next: {lucy_command()} ask \"...\" --stream {result.stream}{data_flag}")
    return code

