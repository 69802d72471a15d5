"""Needle in a video haystack (VideoLucy paper, §4.2) on the embedded backends (pixels captioner, lexical reasoner).

For each haystack length (10 minutes to 2 hours by default) a video is generated: a lobby camera whose scenes
change colour, with signs and coloured squares coming and going as distractors. Five 10-second needles are
inserted at spread-out times; each shows a location sign (big text), a small code line, a few squares of one
colour and a background colour of its own. Each needle has four multiple-choice questions (the code, the number
of squares, their colour, the background colour). The video is ingested at the preset's rate with the continuous
coarse builder (as ``lucy ingest --captioner pixels`` does), then every question is asked (pass 1), and asked
again (pass 2) to measure what memory reuse saves.

Printed: accuracy per haystack length, mean LLM (agent) calls and captioner calls per question, and the
captioner calls of the second pass against the first. Targets: accuracy >= 90 % and flat across lengths, mean
LLM calls per question <= 6.3 (the paper's figure for VideoLucy), second pass <= 50 % of the first pass's
captioner calls.

    .venv/bin/python bench/needle.py                    # 10, 30, 60 and 120 minutes
    .venv/bin/python bench/needle.py --quick            # 10 and 30 minutes, 3 needles each
    .venv/bin/python bench/needle.py --lengths 10 --needles 2 --workdir /tmp/needle --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lucy.backends import Backends, builder_captioner
from lucy.config import LucySettings, load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query.factory import open_engine
from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video

WIDTH, HEIGHT, GEN_FPS = 320, 180, 2.0
NEEDLE_SECONDS = 10.0
TARGET_ACCURACY, TARGET_LLM_CALLS, TARGET_REUSE = 0.90, 6.3, 0.50

SITES = [  # (sign, what the code is, how the small line reads)
    ("HARBOR GATE", "plate number on the van", "VAN PLATE {code}"),
    ("NORTH PLATFORM", "train number", "TRAIN NUMBER {code}"),
    ("MUSEUM ENTRANCE", "ticket code", "TICKET CODE {code}"),
    ("PARKING LEVEL B", "permit number", "PERMIT NUMBER {code}"),
    ("CITY LIBRARY", "book code", "BOOK CODE {code}"),
    ("RIVER BRIDGE", "boat number", "BOAT NUMBER {code}"),
]
SQUARE_COLOURS = ["red", "orange", "yellow", "green", "purple", "pink"]
BACKGROUNDS = ["blue", "teal", "brown", "purple", "green"]
HAYSTACK_SIGNS = ["EXIT", "NO PARKING", "OPEN 24 HOURS", "WET FLOOR", "SALE TODAY", "STAFF ONLY", "LIFT OUT OF ORDER"]
HAYSTACK_COLOURS = ["gray", "white", "blue", "green", "teal", "brown", "purple", "yellow"]


@dataclass
class Needle:
    start: float
    site: str
    label: str
    line: str
    code: str
    count: int
    colour: str
    background: str


@dataclass
class Question:
    needle: int
    kind: str
    text: str
    options: list[str]
    truth: int


@dataclass
class Outcome:
    length_min: int
    needle: int
    kind: str
    correct: bool
    confident: bool
    llm_calls: int
    caption_calls: int
    iterations: int
    seconds: float


@dataclass
class LengthReport:
    minutes: int
    prepare_seconds: float = 0.0
    coarse_nodes: int = 0
    first: list[Outcome] = field(default_factory=list)
    second: list[Outcome] = field(default_factory=list)


def _code(rng: random.Random) -> str:
    return f"{rng.choice('ABCDEFGHJKLMNPRSTVWXZ')}{rng.choice('ABCDEFGHJKLMNPRSTVWXZ')}-{rng.randint(1000, 9999)}"


def _twin(code: str, rng: random.Random) -> str:
    """A near twin (two digits swapped): the kind of option only a good reading tells apart."""
    digits = list(code[3:])
    for _ in range(10):
        i = rng.randrange(3)
        if digits[i] != digits[i + 1]:
            digits[i], digits[i + 1] = digits[i + 1], digits[i]
            break
    else:
        digits[0] = str((int(digits[0]) % 9) + 1)
    return code[:3] + "".join(digits)


def _options(truth: str, pool: list[str], rng: random.Random) -> tuple[list[str], int]:
    options = [truth] + rng.sample([p for p in pool if p != truth], 3)
    rng.shuffle(options)
    return options, options.index(truth)


def plan(minutes: int, needles: int, seed: int) -> tuple[list[Needle], list[Question], list[Scene], list[Overlay],
                                                        list[Shape]]:
    """The haystack (scenes, distractor signs and squares) and the needles with their questions."""
    rng = random.Random(seed * 1000 + minutes)
    duration = minutes * 60.0
    sites = rng.sample(SITES, needles)
    found: list[Needle] = []
    for k, (site, label, line) in enumerate(sites):
        slot = duration / needles
        start = round(k * slot + rng.uniform(0.15, 0.85) * (slot - NEEDLE_SECONDS))
        colour = rng.choice(SQUARE_COLOURS)
        background = rng.choice([b for b in BACKGROUNDS if b != colour])
        code = _code(rng)
        found.append(Needle(start, site, label, line.format(code=code), code, rng.randint(2, 5), colour, background))
    scenes, overlays, shapes = [], [Overlay(0, duration, "CAM 3 LOBBY", size=0.06, x=0.6, y=0.85)], []
    t = 0.0
    while t < duration:  # scene changes every 20-90 s
        end = min(duration, t + rng.uniform(20, 90))
        scenes.append(Scene(t, end, PALETTE[rng.choice(HAYSTACK_COLOURS)]))
        t = end
    t = rng.uniform(30, 120)
    while t < duration - 30:  # distractors: big signs and coloured squares every few minutes
        if rng.random() < 0.6:
            overlays.append(Overlay(t, t + 20, rng.choice(HAYSTACK_SIGNS), size=0.1, x=0.05, y=0.08))
        else:
            shapes.append(Shape(t, t + 15, PALETTE[rng.choice(SQUARE_COLOURS)], count=rng.randint(1, 4), x=0.3,
                                y=0.55, size=0.1))
        t += rng.uniform(60, 240)
    # Needles replace the haystack where they are (cut out distractors that would overlap them).
    for n in found:
        end = n.start + NEEDLE_SECONDS
        overlays = [o for o in overlays if o.end <= n.start or o.start >= end or o.text == "CAM 3 LOBBY"]
        shapes = [s for s in shapes if s.end <= n.start or s.start >= end]
        scenes = _cut(scenes, n.start, end) + [Scene(n.start, end, PALETTE[n.background])]
        overlays += [Overlay(n.start, end, n.site, size=0.12, x=0.05, y=0.05),
                     Overlay(n.start, end, n.line, size=0.06, x=0.05, y=0.4)]
        shapes.append(Shape(n.start, end, PALETTE[n.colour], count=n.count, x=0.05, y=0.65, size=0.1))
    scenes.sort(key=lambda s: s.start)
    questions: list[Question] = []
    for i, n in enumerate(found):
        codes, at = _options(n.code, [_twin(n.code, rng), _code(rng), _code(rng)], rng)
        questions.append(Question(i, "code", f"What was the {n.label} shown at the {n.site}?", codes, at))
        counts = ["2", "3", "4", "5"]
        questions.append(Question(i, "count", f"How many squares were shown at the {n.site}?", counts,
                                  counts.index(str(n.count))))
        colours, at = _options(n.colour, SQUARE_COLOURS, rng)
        questions.append(Question(i, "colour", f"What colour were the squares at the {n.site}?", colours, at))
        backs, at = _options(n.background, sorted(set(BACKGROUNDS + ["gray", "yellow"])), rng)
        questions.append(Question(i, "background", f"What was the background colour at the {n.site}?", backs, at))
    return found, questions, scenes, overlays, shapes


def _cut(scenes: list[Scene], start: float, end: float) -> list[Scene]:
    out = []
    for s in scenes:
        if s.end <= start or s.start >= end:
            out.append(s)
            continue
        if s.start < start:
            out.append(Scene(s.start, start, s.color))
        if s.end > end:
            out.append(Scene(end, s.end, s.color))
    return out


def bench_settings(data: Path, preset: str) -> LucySettings:
    return load_settings(data=data, preset=preset, **{
        "ingest.frame_width": WIDTH, "ingest.frame_height": HEIGHT, "captioner.backend": "pixels",
        "captioner.pixels.coarse_max_frames": 8, "captioner.max_in_flight": 2, "reasoner.backend": "lexical"})


def prepare(workdir: Path, minutes: int, needles: int, seed: int, preset: str) -> tuple[LucySettings, list[Question],
                                                                                        float, int]:
    """Generate and ingest one haystack (with coarse captions), unless a previous run left it complete."""
    root = workdir / f"{minutes}min-{needles}n-s{seed}-{preset}"
    root.mkdir(parents=True, exist_ok=True)
    settings = bench_settings(root / "data", preset)
    found, questions, scenes, overlays, shapes = plan(minutes, needles, seed)
    done = root / "ready.json"
    began = time.perf_counter()
    if not done.is_file():
        for path in (root / "data",):
            if path.exists():
                import shutil

                shutil.rmtree(path)
        video = root / "haystack.mp4"
        write_video(video, duration=minutes * 60.0, fps=GEN_FPS, width=WIDTH, height=HEIGHT, scenes=scenes,
                    overlays=overlays, shapes=shapes, gop=64)
        memory = SQLiteMemoryStore.for_data(settings)
        captioner = builder_captioner(settings)
        assert captioner is not None
        builder = CoarseBuilder(settings, "haystack", memory, captioner).start()
        Ingestor(settings, str(video), "haystack", on_commit=builder.on_commit).run()
        if not builder.drain(timeout=3600):
            raise SystemExit("coarse captioning did not finish")
        builder.stop()
        memory.close()
        done.write_text(json.dumps({"needles": [asdict(n) for n in found]}))
    memory = SQLiteMemoryStore.for_data(settings)
    coarse = len(memory.nodes("haystack", level="coarse", origin="ingest"))
    memory.close()
    return settings, questions, time.perf_counter() - began, coarse


def reset_question_memory(settings: LucySettings) -> None:
    """Drop what earlier runs of the benchmark asked (so pass 1 starts from coarse memory only)."""
    import sqlite3

    db = sqlite3.connect(settings.data / "memory.sqlite")
    with db:
        db.execute("DELETE FROM nodes WHERE origin != 'ingest'")
        db.execute("DELETE FROM questions")
    db.close()


async def ask_all(settings: LucySettings, minutes: int, questions: list[Question], verbose: bool,
                  ) -> tuple[list[Outcome], list[Outcome]]:
    backends = Backends()  # one captioner and reasoner for both passes, as a server shares them
    passes: list[list[Outcome]] = [[], []]
    try:
        async with open_engine(settings, "haystack", backends=backends) as engine:
            for p in range(2):
                for q in questions:
                    began = time.perf_counter()
                    result = await engine.ask(q.text, q.options)
                    outcome = Outcome(minutes, q.needle, q.kind, result.option_index == q.truth, result.confident,
                                      result.llm_calls, result.caption_calls, result.iterations,
                                      time.perf_counter() - began)
                    passes[p].append(outcome)
                    if verbose:
                        mark = "ok " if outcome.correct else "BAD"
                        print(f"  pass {p + 1} {mark} {q.kind:10} needle {q.needle} llm {outcome.llm_calls:2} "
                              f"captions {outcome.caption_calls:3} it {outcome.iterations} "
                              f"{'confident' if result.confident else 'unsure   '} {outcome.seconds:5.1f}s | "
                              f"{q.text} -> {result.answer!r} (truth {q.options[q.truth]!r})", flush=True)
    finally:
        await backends.aclose()
    return passes[0], passes[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="10,30,60,120", help="haystack lengths in minutes, comma-separated")
    parser.add_argument("--needles", type=int, default=5, help="needles per haystack (4 questions each)")
    parser.add_argument("--quick", action="store_true", help="a quick subset: 10 and 30 minutes, 3 needles")
    parser.add_argument("--preset", default="live", help="memory-level preset (default live: T = 60/10/2 s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="keep videos and memory here (reused by later runs)")
    parser.add_argument("--json", type=Path, help="also write every question's outcome to this file")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every question as it is answered")
    args = parser.parse_args(argv)
    if args.quick:
        args.lengths, args.needles = "10,30", 3
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    if not 1 <= args.needles <= len(SITES):
        parser.error(f"--needles must be 1 to {len(SITES)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lucy-needle-"))
    reports: list[LengthReport] = []
    for minutes in lengths:
        print(f"haystack {minutes} min: generating, ingesting and captioning coarse memory...", flush=True)
        settings, questions, prep, coarse = prepare(workdir, minutes, args.needles, args.seed, args.preset)
        reset_question_memory(settings)
        report = LengthReport(minutes, prep, coarse)
        began = time.perf_counter()
        report.first, report.second = asyncio.run(ask_all(settings, minutes, questions, args.verbose))
        print(f"  ready in {prep:.0f} s ({coarse} coarse nodes); {len(questions)} questions x 2 passes in "
              f"{time.perf_counter() - began:.0f} s", flush=True)
        reports.append(report)

    print()
    print(f"Needle in a video haystack: {args.needles} needles x 4 questions per length, preset {args.preset}, "
          f"{WIDTH}x{HEIGHT} video, pixels captioner + lexical reasoner")
    print(f"{'length':>8} {'accuracy':>9} {'confident':>9} {'llm/q':>6} {'capt/q':>7} {'iter/q':>6} "
          f"{'2nd acc':>8} {'2nd capt/q':>10} {'2nd llm/q':>9}")
    first_all = [o for r in reports for o in r.first]
    second_all = [o for r in reports for o in r.second]
    accuracies = []
    for r in reports:
        acc = statistics.mean(o.correct for o in r.first)
        accuracies.append(acc)
        print(f"{r.minutes:>6} m {acc:>9.0%} {statistics.mean(o.confident for o in r.first):>9.0%} "
              f"{statistics.mean(o.llm_calls for o in r.first):>6.2f} "
              f"{statistics.mean(o.caption_calls for o in r.first):>7.2f} "
              f"{statistics.mean(o.iterations for o in r.first):>6.2f} "
              f"{statistics.mean(o.correct for o in r.second):>8.0%} "
              f"{statistics.mean(o.caption_calls for o in r.second):>10.2f} "
              f"{statistics.mean(o.llm_calls for o in r.second):>9.2f}")
    accuracy = statistics.mean(o.correct for o in first_all)
    llm = statistics.mean(o.llm_calls for o in first_all)
    captions_1 = sum(o.caption_calls for o in first_all)
    captions_2 = sum(o.caption_calls for o in second_all)
    ratio = captions_2 / captions_1 if captions_1 else 0.0
    spread = max(accuracies) - min(accuracies)
    by_kind = {k: statistics.mean(o.correct for o in first_all if o.kind == k)
               for k in ("code", "count", "colour", "background")}
    print("by question kind: " + ", ".join(f"{k} {v:.0%}" for k, v in by_kind.items()))
    print(f"overall accuracy {accuracy:.1%} (spread across lengths {spread:.0%})  "
          f"[target >= {TARGET_ACCURACY:.0%}, flat: {'PASS' if accuracy >= TARGET_ACCURACY else 'FAIL'}]")
    print(f"mean LLM calls per question {llm:.2f}  [target <= {TARGET_LLM_CALLS}: "
          f"{'PASS' if llm <= TARGET_LLM_CALLS else 'FAIL'}]")
    print(f"mean captioner calls per question {statistics.mean(o.caption_calls for o in first_all):.2f} (pass 1), "
          f"{statistics.mean(o.caption_calls for o in second_all):.2f} (pass 2)")
    # The first question about a needle starts from coarse memory alone; the next three start from what it found.
    opening = [o for o in first_all if o.kind == "code"]
    rest = [o for o in first_all if o.kind != "code"]
    print(f"pass 1, first question per needle: accuracy {statistics.mean(o.correct for o in opening):.0%}, "
          f"{statistics.mean(o.llm_calls for o in opening):.2f} LLM calls, "
          f"{statistics.mean(o.caption_calls for o in opening):.2f} captioner calls, "
          f"{statistics.mean(o.iterations for o in opening):.2f} rounds; the other three: "
          f"{statistics.mean(o.llm_calls for o in rest):.2f} LLM calls, "
          f"{statistics.mean(o.caption_calls for o in rest):.2f} captioner calls")
    print(f"second pass captioner calls {captions_2} vs {captions_1} in the first: {ratio:.0%}, "
          f"{captions_1 - captions_2} saved by memory reuse  [target <= {TARGET_REUSE:.0%}: "
          f"{'PASS' if ratio <= TARGET_REUSE else 'FAIL'}]")
    if args.json:
        args.json.write_text(json.dumps({"reports": [asdict(r) for r in reports], "accuracy": accuracy,
                                         "llm_calls_per_question": llm, "second_pass_caption_ratio": ratio}, indent=1))
    print(f"(videos and memory kept in {workdir})")
    ok = accuracy >= TARGET_ACCURACY and llm <= TARGET_LLM_CALLS and ratio <= TARGET_REUSE
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
