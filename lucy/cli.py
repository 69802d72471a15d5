"""The ``lucy`` command line. Errors caused by input print one line and exit non-zero, without a traceback."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from lucy.config import (
    CAPTIONER_BACKENDS,
    LEVEL_NAMES_HELP,
    PRESETS,
    REASONER_BACKENDS,
    LucySettings,
    check_level_name,
    load_settings,
)
from lucy.errors import LucyError

if TYPE_CHECKING:  # imported where used: `lucy config show` need not load ingest
    from lucy.ingest import FrameStores
    from lucy.memory.store import MemoryStore
    from lucy.recorder import RecorderObserver, Recording
    from lucy.watch import Alert

EXIT_ERROR = 1  # bad input, unreachable source, damaged file (what could be stored was kept)
SEARCH_LINES = 3  # lines of a caption `lucy search` shows per hit (those with the query's words)


def _settings(args: argparse.Namespace, **flags: Any) -> LucySettings:
    return load_settings(getattr(args, "config", None), data=getattr(args, "data", None),
                         preset=getattr(args, "preset", None), **flags)


class _StatusLine:
    """One status line on stderr, refreshed at most twice a second (only on a terminal)."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self._last = 0.0
        self._shown = False

    def show(self, text: str) -> None:
        now = time.monotonic()
        if self.enabled and now - self._last >= 0.5:
            self._last, self._shown = now, True
            sys.stderr.write(f"\r\x1b[K{text}")
            sys.stderr.flush()

    def close(self) -> None:
        """End the line (the next ``show`` starts a new one)."""
        if self._shown:
            sys.stderr.write("\n")
            self._shown = False


def _ingest_line(stream: str, line: _StatusLine) -> RecorderObserver:
    """``lucy ingest``'s status line: frames as they are stored, then the caption backlog of a finished file."""
    from lucy.metrics import StreamProgress
    from lucy.recorder import RecorderObserver

    class IngestLine(RecorderObserver):
        def on_commit(self, progress: StreamProgress) -> None:
            i, c = progress.ingest, progress.caption
            captions = "" if c is None else f" | captions {c.captions_per_second:5.2f}/s, lag {c.lag:7.1f} s"
            line.show(f"{stream}: media {i.ingested_until:8.1f} s | decode {i.decode_fps:6.1f} fps | "
                      f"{i.realtime_factor:5.1f}x real time | {i.committed} frames stored{captions}")

        def on_ingest_end(self, progress: StreamProgress) -> None:
            line.close()

        def on_drain(self, progress: StreamProgress) -> None:
            c = progress.caption
            assert c is not None  # only a recording with a captioner drains
            line.show(f"{stream}: captioning backlog: {c.pending} spans left | {c.captions_per_second:5.2f} captions/s"
                      f" | captioned until {c.captioned_until:.1f} s of {progress.ingest.ingested_until:.1f} s")

    return IngestLine()


def cmd_ingest(args: argparse.Namespace) -> int:
    from lucy.backends import builder_captioner, builder_embedder, builder_transcriber
    from lucy.memory.nodes import INGEST_ORIGIN
    from lucy.memory.sqlite_store import open_memory
    from lucy.recorder import StreamRecorder

    settings = _settings(args, **{"captioner.backend": args.captioner})
    line = _StatusLine()
    memory = open_memory(settings)
    try:
        recorder = StreamRecorder(settings, args.source, args.stream, memory, builder_captioner(settings),
                                  realtime=args.realtime, observer=_ingest_line(args.stream, line),
                                  transcriber=builder_transcriber(settings), embedder=builder_embedder(settings))

        def terminate(signum: int, _frame: object) -> None:
            # Stop cleanly: frames already decoded are committed and the summary printed.
            recorder.stop()
            if signum == signal.SIGINT:
                signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C aborts at once

        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGINT, terminate)
        try:
            recording = recorder.run()
        except KeyboardInterrupt:
            recorder.stop()
            line.close()
            print("lucy: interrupted; everything committed so far is kept", file=sys.stderr)
            return 130
        line.close()
        coarse_nodes = memory.count(args.stream, level="coarse", origin=INGEST_ORIGIN)
        captioned_until = memory.captioned_until(args.stream)
    finally:
        memory.close()
    return _ingest_summary(recording, coarse_nodes, captioned_until, as_json=args.json)


def _ingest_summary(recording: Recording, coarse_nodes: int, captioned_until: float, *, as_json: bool) -> int:
    """Print how ``lucy ingest``'s recording ended; returns the exit code."""
    from lucy.recorder import Backlog

    result, left = recording.ingest, recording.uncaptioned
    if as_json:
        print(json.dumps({"stream": result.stream, "frames": result.frames,
                          "media_seconds": round(result.media_seconds, 3), "wall_seconds": round(result.wall_seconds, 3),
                          "new_frames": result.new_frames, "complete": result.complete, "lost": result.lost,
                          "decode_errors": result.decode_errors, "reconnects": result.reconnects,
                          "coarse_nodes": coarse_nodes, "captioned_until": round(captioned_until, 3),
                          "coarse_pending": left}))
    else:
        print(f"{result.stream}: {result.new_frames} new frames, {result.frames} stored, "
              f"{result.media_seconds:.1f} s of media in {result.wall_seconds:.1f} s; "
              f"{coarse_nodes} coarse captions, captioned until {captioned_until:.1f} s")
    code = 0
    if result.lost:
        print(f"lucy: error: {result.lost} (the frames before it are stored)", file=sys.stderr)
        code = EXIT_ERROR
    if recording.backlog in (Backlog.CAPTIONER_DOWN, Backlog.TIMED_OUT):
        reason = recording.last_caption_error or "it made no progress"
        print(f"lucy: error: captioner unavailable ({reason}); {left} coarse spans left uncaptioned "
              f"(they are captioned on the next run)", file=sys.stderr)
        code = EXIT_ERROR
    elif left:
        print(f"lucy: {left} coarse spans not captioned yet (they are captioned on the next run)", file=sys.stderr)
    return code


def _stream_rows(settings: LucySettings) -> list[dict[str, Any]]:
    from lucy.ingest import open_frames

    frames = open_frames(settings)
    rows = []
    for name in frames.names():
        info = frames.open(name).info()
        rows.append({"stream": name, "source": info.source, "live": info.live, "frames": info.frames,
                     "media_seconds": round(info.media_seconds, 3), "stored_fps": info.stored_fps,
                     "size": f"{info.width}x{info.height}", "codec": info.codec, "complete": info.complete,
                     "wall_start": info.wall_start, "gaps": len(info.gaps), "lost": info.lost})
    return rows


def cmd_streams(args: argparse.Namespace) -> int:
    settings = _settings(args)
    rows = _stream_rows(settings)
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print(f"no streams in {settings.data}")
        return 0
    print(f"{'STREAM':20} {'FRAMES':>8} {'DURATION':>10} {'FPS':>5} {'SIZE':>9} {'GAPS':>4}  SOURCE")
    for r in rows:
        state = "" if r["complete"] or r["live"] else " (partial)"
        print(f"{r['stream']:20} {r['frames']:>8} {r['media_seconds']:>9.1f}s {r['stored_fps']:>5g} {r['size']:>9} "
              f"{r['gaps']:>4}  {r['source']}{state}")
    return 0


def _memory_level(value: str) -> str:
    try:
        return check_level_name(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _clock(seconds: float) -> str:
    minutes, sec = divmod(max(seconds, 0.0), 60)
    return f"{int(minutes // 60)}:{int(minutes % 60):02d}:{sec:04.1f}"


def cmd_memory(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from lucy.ingest import check_stream_name, open_frames
    from lucy.memory.sqlite_store import open_existing_memory

    settings = _settings(args)
    stream = check_stream_name(args.stream)
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise LucyError(f"--to ({args.end:g}) must be after --from ({args.start:g})")
    nodes, until, known = [], 0.0, open_frames(settings).exists(stream)
    memory = open_existing_memory(settings)  # reading never creates a memory store
    if memory is not None:
        try:
            nodes = memory.nodes(stream, level=args.level, start=args.start, end=args.end)
            until = memory.captioned_until(stream)
            known = known or stream in memory.streams()
        finally:
            memory.close()
    if not known:
        raise LucyError(f"no stream named {stream!r} in {settings.data}")
    if args.json:
        print(json.dumps({"stream": stream, "captioned_until": round(until, 3),
                          "nodes": [asdict(node) for node in nodes]}))
        return 0
    print(f"{stream}: {len(nodes)} memory nodes; coarse captions cover 0-{until:.1f} s")
    for node in nodes:
        made = f"{node.origin}, {node.model}" if node.model else node.origin
        print(f"[{_clock(node.start)} - {_clock(node.end)}] {node.level} ({made})")
        for line in node.text.splitlines() or [""]:
            print(f"    {line}")
    return 0


def _search_level(value: str) -> str:
    from lucy.memory.transcribers import SPEECH_LEVEL

    return value if value == SPEECH_LEVEL else _memory_level(value)


def _search_limit(value: str) -> int:
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to 100")
    return limit


def _excerpt(text: str, query: str, lines: int, width: int = 100) -> list[str]:
    """At most ``lines`` lines of ``text``, each cut to ``width`` characters: those with the most words of
    ``query`` (the first lines when none has one), in their order, and a line saying how many were left out."""
    import re
    import textwrap

    words = {w for w in re.findall(r"\w+", query.lower()) if len(w) >= 4 or any(c.isdigit() for c in w)}
    all_lines = [line.strip() for line in text.splitlines() if line.strip()] or [""]
    found = [sum(w in line.lower() for w in words) for line in all_lines]
    best = sorted(range(len(all_lines)), key=lambda i: (-found[i], i))[:lines]
    chosen = sorted(i for i in best if found[i]) or list(range(min(lines, len(all_lines))))
    out = [textwrap.shorten(all_lines[i], width, placeholder=" …") for i in chosen]
    if len(all_lines) > len(chosen):
        out.append(f"… {len(all_lines) - len(chosen)} more lines")
    return out


def cmd_search(args: argparse.Namespace) -> int:
    from lucy.ingest import check_stream_name, open_frames
    from lucy.memory.embedders import make_embedder
    from lucy.memory.nodes import INGEST_ORIGIN
    from lucy.memory.retrieval import MemoryIndex
    from lucy.memory.sqlite_store import open_existing_memory

    settings = _settings(args)
    stream = check_stream_name(args.stream)
    text = args.text.strip()
    if not text:
        raise LucyError("the search text is empty")
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise LucyError(f"--end ({args.end:g}) must be after --start ({args.start:g})")
    memory = open_existing_memory(settings)  # reading never creates a memory store
    try:
        known = set(open_frames(settings).names()) | set(memory.streams() if memory is not None else ())
        if stream not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise LucyError(f"no stream named {stream!r} in {settings.data} (streams: {listed})")
        hits, mode = [], "words only: the stream has no memory yet"
        if memory is not None:
            embedder = make_embedder(settings)
            if embedder is not None:
                mode = f"words + meaning ({embedder.name} {embedder.model})"
            elif settings.embedder.backend == "none":
                mode = "words only: embedder.backend is 'none'"
            else:  # make_embedder logged why
                mode = f"words only: the {settings.embedder.backend} embedder cannot run on this machine"
            try:
                hits = MemoryIndex(memory, embedder).search(stream, text, level=args.level, start=args.start,
                                                            end=args.end, limit=args.limit)
            finally:
                if embedder is not None:
                    embedder.close()
    finally:
        if memory is not None:
            memory.close()
    if args.json:
        print(json.dumps([{"stream": h.node.stream, "level": h.node.level, "start": h.node.start,
                           "end": h.node.end, "text": h.node.text, "score": h.score, "lexical_rank": h.lexical_rank,
                           "semantic_rank": h.semantic_rank, "similarity": h.similarity, "node_id": h.node.id,
                           "origin": h.node.origin} for h in hits]))
        return 0
    print(f"{stream}: {len(hits)} {'match' if len(hits) == 1 else 'matches'} for {text!r}")
    print(f"searched by {mode}")
    if not hits:
        print(f"no memory matches; try other words or `lucy memory --stream {stream}`")
    for hit in hits:
        node = hit.node
        made = "" if node.origin == INGEST_ORIGIN else f", {node.origin}"
        print(f"[{_clock(node.start)} - {_clock(node.end)}] {node.level}{made}  score {hit.score:.3f}")
        for line in _excerpt(node.text, text, SEARCH_LINES):
            print(f"    {line}")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    settings = _settings(args)
    shown = settings.model_dump(mode="json")
    shown["levels"] = settings.levels.model_dump(mode="json")
    if args.json:
        print(json.dumps(shown, indent=2))
    else:
        _print_tree(shown)
    return 0


def _print_tree(value: dict[str, Any], indent: int = 0) -> None:
    for key, item in value.items():
        if isinstance(item, dict):
            print(f"{' ' * indent}{key}:")
            _print_tree(item, indent + 2)
        else:
            print(f"{' ' * indent}{key}: {item}")


def cmd_ask(args: argparse.Namespace) -> int:
    from lucy.query.console import ask_command

    settings = _settings(args, **{"reasoner.backend": args.reasoner, "captioner.backend": args.captioner})
    return ask_command(settings, args.stream, args.question, args.option or (), as_json=args.json)


WATCH_POLL_SECONDS = 0.5  # how often `lucy watch` looks for new alerts


def _print_alert(alert: Alert, *, as_json: bool) -> None:
    from dataclasses import asdict

    if as_json:
        print(json.dumps(asdict(alert)), flush=True)
    else:
        print(f"[{_clock(alert.start)} - {_clock(alert.end)}] watch {alert.watch_id} ({alert.level}): {alert.reason}",
              flush=True)


def cmd_watch(args: argparse.Namespace) -> int:
    """Register a standing question and follow its alerts; the process ingesting the stream does the checking."""
    from lucy.ingest import check_stream_name, open_frames
    from lucy.memory.sqlite_store import open_memory

    settings = _settings(args)
    memory = open_memory(settings)
    try:
        if args.delete is not None:
            if not memory.delete_watch(args.delete):
                raise LucyError(f"no active watch with id {args.delete}")
            print(f"watch {args.delete} deleted (its alerts are kept)")
            return 0
        if args.stream is None:
            raise LucyError("--stream is required")
        stream = check_stream_name(args.stream)
        if args.list:
            from dataclasses import asdict

            rows = [{**asdict(w), "checked_until": memory.watch_progress(w.id)} for w in memory.watches(stream)]
            if args.json:
                print(json.dumps(rows))
                return 0
            if not rows:
                print(f"{stream}: no watches")
            for r in rows:
                print(f"{r['id']:>5}  checked until {_clock(r['checked_until'])}  cooldown {r['cooldown_seconds']:g} s"
                      f"  {r['question']}")
            return 0
        if not args.question or not args.question.strip():
            raise LucyError("the watch question is empty")
        cooldown = settings.watch.default_cooldown_seconds if args.cooldown is None else args.cooldown
        watch = memory.add_watch(stream, args.question, cooldown_seconds=cooldown)
        if args.from_start:
            memory.set_watch_progress(watch.id, 0.0)
        if not args.json:
            print(f"watch {watch.id} on {stream}: {watch.question!r} (checked by the process ingesting {stream}, "
                  f"from {'its start' if args.from_start else 'its next coarse span'})", file=sys.stderr)
        frames = open_frames(settings)
        if not frames.exists(stream):  # allowed (the ingest may start later), but a misspelt name must show
            known = ", ".join(frames.names()) or "none"
            print(f"lucy: no stream named {stream!r} yet: the watch waits for `lucy ingest SOURCE --stream {stream}` "
                  f"(streams now: {known})", file=sys.stderr)
        return _follow(memory, frames, stream, watch.id, until_finished=args.until_finished, as_json=args.json)
    finally:
        memory.close()


def _follow(memory: MemoryStore, frames: FrameStores, stream: str, watch_id: int, *, until_finished: bool,
            as_json: bool) -> int:
    """Print the watch's alerts as they are stored; returns the exit code (130 on Ctrl-C)."""
    after = 0
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
            time.sleep(WATCH_POLL_SECONDS)
    except KeyboardInterrupt:
        print(f"lucy: interrupted; watch {watch_id} stays registered (`lucy watch --delete {watch_id}` removes it)",
              file=sys.stderr)
        return 130


def cmd_demo(args: argparse.Namespace) -> int:
    from lucy.demo import run_demo

    return run_demo(_settings(args), workdir=args.workdir, realtime=not args.fast)


def cmd_serve(args: argparse.Namespace) -> int:
    from lucy.service.server import serve

    return serve(_settings(args, **{"service.host": args.host, "service.port": args.port}))


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data", type=Path, help="data directory (default ./lucy-data or $LUCY_DATA)")
    common.add_argument("--config", type=Path, help="TOML configuration file (default ./lucy.toml or $LUCY_CONFIG)")
    common.add_argument("--preset", choices=sorted(PRESETS), help="memory-level preset")

    parser = argparse.ArgumentParser(prog="lucy", description="Lucy: ask questions about video while it streams.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", parents=[common], help="decode a file or live stream into the frame store")
    p.add_argument("source", help="video file, rtsp://, http(s):// (HLS too)")
    p.add_argument("--stream", required=True, help="stream name")
    p.add_argument("--realtime", action="store_true", help="pace a file like a live stream")
    p.add_argument("--json", action="store_true", help="print one JSON summary at the end")
    p.add_argument("--captioner", choices=CAPTIONER_BACKENDS,
                   help="backend that captions coarse memory while ingesting (default: captioner.backend)")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("memory", parents=[common], help="print the memory timeline of a stream")
    p.add_argument("--stream", required=True, help="stream name")
    p.add_argument("--level", type=_memory_level, help=f"{LEVEL_NAMES_HELP} (default: all)")
    p.add_argument("--from", dest="start", type=float, metavar="T", help="from media second T")
    p.add_argument("--to", dest="end", type=float, metavar="T", help="up to media second T")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_memory)

    p = sub.add_parser("search", parents=[common], help="find the moments of a stream's memory that match some words")
    p.add_argument("text", help="what to look for, in your own words")
    p.add_argument("--stream", required=True, help="stream name")
    p.add_argument("--level", type=_search_level, help=f"{LEVEL_NAMES_HELP}; speech for what was said (default: all)")
    p.add_argument("--start", type=float, metavar="T", help="from media second T")
    p.add_argument("--end", type=float, metavar="T", help="up to media second T")
    p.add_argument("--limit", type=_search_limit, default=20, metavar="N", help="at most N matches (1-100, default 20)")
    p.add_argument("--json", action="store_true", help="print the matches as one JSON list")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("watch", parents=[common], help="tell me when something shows up in a stream (standing question)")
    p.add_argument("question", nargs="?", help='what to watch for, e.g. "tell me when someone is at the door"')
    p.add_argument("--stream", help="stream name")
    p.add_argument("--cooldown", type=float, metavar="SECONDS",
                   help="media seconds after a yes that count as the same event (default: watch.default_cooldown_seconds)")
    p.add_argument("--until-finished", action="store_true",
                   help="exit once the stream has ended and all of it was checked")
    p.add_argument("--from-start", action="store_true", help="check what the stream has already shown too")
    p.add_argument("--json", action="store_true", help="print one JSON line per alert")
    p.add_argument("--list", action="store_true", help="list the stream's watches")
    p.add_argument("--delete", type=int, metavar="ID", help="delete a watch (its alerts are kept)")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("streams", parents=[common], help="list the streams of a data directory")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_streams)

    p = sub.add_parser("config", help="configuration")
    config_sub = p.add_subparsers(dest="config_command", required=True)
    p = config_sub.add_parser("show", parents=[common], help="print the effective configuration")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_config_show)

    p = sub.add_parser("ask", parents=[common], help="answer a question about what a stream has shown so far")
    p.add_argument("question", help="the question")
    p.add_argument("--stream", required=True, help="stream name")
    p.add_argument("--option", action="append", metavar="TEXT", help="a multiple-choice option (repeat for each)")
    p.add_argument("--json", action="store_true", help="print one JSON object (answer, evidence, costs, trace)")
    p.add_argument("--reasoner", choices=REASONER_BACKENDS, help="agents' backend (default: reasoner.backend)")
    p.add_argument("--captioner", choices=CAPTIONER_BACKENDS,
                   help="backend that captions deeper memory (default: captioner.backend)")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("demo", parents=[common], help="generate a sample video, ingest it, show the result")
    p.add_argument("--workdir", type=Path, default=None, help="where to put the sample video and data")
    p.add_argument("--fast", action="store_true", help="ingest as fast as possible instead of in real time")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("serve", parents=[common], help="serve the HTTP API, MQTT bridge, metrics and dashboard")
    p.add_argument("--host", help="address to bind (default 127.0.0.1; others need service.api_token)")
    p.add_argument("--port", type=int, help="TCP port (default 8321)")
    p.set_defaults(func=cmd_serve)
    return parser


def _configure_logging() -> None:
    from lucy.ingest.source import redacting_handler

    logging.basicConfig(level=logging.WARNING, handlers=[redacting_handler()])


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging()
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except LucyError as err:
        print(f"lucy: error: {err}", file=sys.stderr)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in err.errors())
        print(f"lucy: error: invalid configuration: {problems}", file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
