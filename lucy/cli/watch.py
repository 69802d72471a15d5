"""``lucy watch``: a standing question. It is registered here and checked by the process ingesting the stream; this
command lists, deletes, or follows the alerts as they are stored.

``--until-finished`` waits for the stream's end only while something ingests it (a process holds the stream's
writer lock, :mod:`lucy.ingest.lock`). When nothing does, the stream's memory cannot grow: this command checks the
coarse spans already stored that the watch has not checked (all of them with ``--from-start``) itself, under the
stream's lock, prints their alerts, says on stderr that nothing is ingesting the stream (with ``--json``, also a
last ``{"status": "not_ingesting", ...}`` line on stdout) and exits 0. ``--follow`` waits instead, for an ingest
that starts later."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from lucy.cli.common import (
    EXIT_INTERRUPTED,
    ConfigOption,
    DataOption,
    PresetOption,
    VerboseOption,
    clock,
    closest,
    ingest_hint,
    load,
    note,
)
from lucy.errors import LucyError
from lucy.shell import lucy_command
from lucy.untrusted import normalise_question

if TYPE_CHECKING:
    from lucy.config import LucySettings
    from lucy.ingest import FrameStores
    from lucy.memory.store import MemoryStore
    from lucy.memory.watches import Alert

WATCH_POLL_SECONDS = 0.5  # how often `lucy watch` looks for new alerts


def watch(question: Annotated[str | None, typer.Argument(
              metavar="QUESTION", show_default=False,
              help='What to watch for, e.g. "tell me when someone is at the door".')] = None,
          stream: Annotated[str | None, typer.Option("--stream", help="Stream name.", show_default=False)] = None,
          cooldown: Annotated[float | None, typer.Option(
              metavar="SECONDS", show_default=False,
              help="Media seconds after a yes that count as the same event (default: watch.default_cooldown_seconds)."
          )] = None,
          until_finished: Annotated[bool, typer.Option(
              "--until-finished", help="Exit once the stream has ended and all of it was checked; at once if "
                                       "nothing ingests the stream, after checking what its memory holds.")] = False,
          follow: Annotated[bool, typer.Option(
              "--follow", help="With --until-finished: wait for an ingest of the stream to start, rather than "
                               "exit when nothing ingests it.")] = False,
          from_start: Annotated[bool, typer.Option(
              "--from-start", help="Check what the stream has already shown too.")] = False,
          as_json: Annotated[bool, typer.Option("--json", help="Print one JSON line per alert.")] = False,
          list_: Annotated[bool, typer.Option("--list", help="List the stream's watches.")] = False,
          delete: Annotated[int | None, typer.Option(metavar="ID", show_default=False,
                                                     help="Delete a watch (its alerts are kept).")] = None,
          data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
          verbose: VerboseOption = 0) -> int:
    """Tell me when something shows up in a stream (a standing question).

    The process ingesting the stream (`lucy ingest`, or `lucy serve`'s worker) checks each closed span.
    This command prints the alerts as they are stored, until Ctrl-C (exit 130; the watch stays registered).
    """
    from lucy.ingest import check_stream_name
    from lucy.wiring import open_frames, open_memory

    settings = load(data, config, preset, verbose)
    memory = open_memory(settings)
    try:
        if delete is not None:
            if not memory.delete_watch(delete):
                raise LucyError(f"no active watch with id {delete}")
            print(f"watch {delete} deleted (its alerts are kept)")
            return 0
        if stream is None:
            raise LucyError("--stream is required")
        check_stream_name(stream)
        if list_:
            return _list(memory, stream, as_json=as_json)
        # InputError (a LucyError): empty once invisible characters are taken out.
        question = normalise_question(question or "", what="watch question")[0]
        added, new = memory.register_watch(stream, question,
                                           cooldown_seconds=settings.watch.default_cooldown_seconds
                                           if cooldown is None else cooldown)
        if new and from_start:
            memory.set_watch_progress(added.id, 0.0)
        if not new:  # the same question on the same stream: followed, not registered twice; what it already
            # checked is not checked again (its alerts are printed below), with or without --from-start
            note(f"watch {added.id} on {stream} is already registered: {added.question!r} (checked until "
                 f"{clock(memory.watch_progress(added.id))}); following it")
        elif not as_json:
            note(f"watch {added.id} on {stream}: {added.question!r} (checked by the process ingesting {stream}, "
                 f"from {'its start' if from_start else 'its next coarse span'})")
        frames = open_frames(settings)
        if not frames.exists(stream):  # allowed (the ingest may start later), but a misspelt name must show
            names = sorted(set(frames.names()) | set(memory.streams()))
            guess = closest(stream, names)
            mean = f"; did you mean {guess!r}?" if guess else ""
            note(f"no stream named {stream!r} yet: the watch waits for {ingest_hint(stream)} "
                 f"(streams now: {', '.join(names) or 'none'}){mean}")
        idle = None if not until_finished or follow else (lambda: _check_if_idle(settings, memory, frames, stream))
        return _follow(memory, frames, stream, added.id, until_finished=until_finished, as_json=as_json, idle=idle)
    finally:
        memory.close()


def _list(memory: MemoryStore, stream: str, *, as_json: bool) -> int:
    from dataclasses import asdict

    rows = [{**asdict(w), "checked_until": memory.watch_progress(w.id)} for w in memory.watches(stream)]
    if as_json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print(f"{stream}: no watches")
    for r in rows:
        print(f"{r['id']:>5}  checked until {clock(r['checked_until'])}  cooldown {r['cooldown_seconds']:g} s"
              f"  {r['question']}")
    return 0


def _print_alert(alert: Alert, *, as_json: bool) -> None:
    from dataclasses import asdict

    if as_json:
        print(json.dumps(asdict(alert)), flush=True)
    else:
        print(f"[{clock(alert.start)} - {clock(alert.end)}] watch {alert.watch_id} ({alert.level}): {alert.reason}",
              flush=True)


def _check_if_idle(settings: LucySettings, memory: MemoryStore, frames: FrameStores, stream: str) -> bool:
    """If nothing ingests ``stream``, check the stored coarse spans its watches have not checked yet, holding the
    stream's writer lock meanwhile (an ingest that starts now waits its turn); whether nothing ingested it."""
    import asyncio

    from lucy.backends import builder_captioner, builder_embedder, builder_reasoner
    from lucy.ingest.lock import Holder, LockHeld, stream_lock
    from lucy.watch.checker import WatchChecker

    lock = stream_lock(settings.data, stream, holder=Holder.this_process())
    try:
        lock.acquire()
    except LockHeld:
        return False
    try:
        end = memory.captioned_until(stream)
        if end > 0 and settings.watch.enabled:
            captioner = builder_captioner(settings)
            embedder = builder_embedder(settings)  # speech watches compare what was said by meaning too
            checker = WatchChecker(settings, stream, memory, builder_reasoner(settings), captioner, frames,
                                   embedder=embedder)

            async def check() -> None:
                try:
                    await checker.check_span(0.0, end)
                finally:
                    await checker.aclose()
                    if captioner is not None:
                        await captioner.aclose()
                    if embedder is not None:
                        embedder.close()

            asyncio.run(check())
        return True
    finally:
        lock.release()


def _follow(memory: MemoryStore, frames: FrameStores, stream: str, watch_id: int, *, until_finished: bool,
            as_json: bool, idle: Callable[[], bool] | None = None) -> int:
    """Print the watch's alerts as they are stored; returns the exit code (130 on Ctrl-C). ``idle``: checks what
    memory holds if nothing ingests the stream, and says whether nothing did; then this returns (0)."""
    after, idle_checked = 0, False
    try:
        while True:
            for alert in memory.alerts(watch_id=watch_id, after_id=after):
                _print_alert(alert, as_json=as_json)
                after = int(alert.id)
            if until_finished and frames.exists(stream):
                info = frames.open(stream).info()
                finished = not info.live and (info.complete or info.lost is not None)
                if finished and memory.watch_progress(watch_id) >= info.media_seconds - 1e-3:
                    for alert in memory.alerts(watch_id=watch_id, after_id=after):
                        _print_alert(alert, as_json=as_json)
                    return 0
            if idle is not None and (idle_checked or idle()):
                if not idle_checked:  # print its alerts, and end as finished if that check finished the stream
                    idle_checked = True
                    continue
                checked = memory.watch_progress(watch_id)
                note(f"nothing is ingesting {stream!r}: watch {watch_id} checked what its memory holds (until "
                     f"{clock(checked)}); it stays registered and is checked when {ingest_hint(stream)} runs "
                     "(add --follow to wait for it)")
                if as_json:
                    print(json.dumps({"status": "not_ingesting", "stream": stream, "watch_id": watch_id,
                                      "checked_until": checked}), flush=True)
                return 0
            time.sleep(WATCH_POLL_SECONDS)
    except KeyboardInterrupt:
        print(f"lucy: interrupted; watch {watch_id} stays registered (`{lucy_command()} watch --delete {watch_id}` "
              "removes it)", file=sys.stderr)
        return EXIT_INTERRUPTED
