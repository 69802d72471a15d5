"""Small samples of each benchmark's format around synthetic videos whose answers are known.

Each video (:func:`sample_video`) is a camera with a few *needles*: a place sign and, under it, a code line, with
coloured squares, each shown for a while on a background of its own. The annotation files ask about them in the
benchmark's own format (the right option is what the video shows), with one record that cannot be scored, as real
annotation files have. Used by the tests and for a quick look at the harness: ``python -m lucy.eval.samples DIR``.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video

WIDTH, HEIGHT = 320, 180
FPS = 2.0
SITES = ["HARBOR GATE", "NORTH PLATFORM", "MUSEUM ENTRANCE", "CITY LIBRARY", "RIVER BRIDGE", "PARKING LEVEL B"]
COLOURS = ["red", "orange", "yellow", "green", "purple", "pink"]
BACKGROUNDS = ["blue", "teal", "brown", "gray"]


@dataclass(frozen=True)
class Needle:
    start: float
    end: float
    site: str
    code: str
    colour: str
    count: int


@dataclass(frozen=True)
class SampleVideo:
    name: str
    seconds: float
    needles: list[Needle]


@dataclass(frozen=True)
class Sample:
    """A generated sample: the annotations to pass to the harness and the folder of its videos."""

    benchmark: str
    annotations: Path
    videos: Path
    clips: list[SampleVideo]


def _code(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPRSTVWXZ"
    return f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randint(1000, 9999)}"


def plan_video(name: str, seconds: float, seed: int, needles: int = 2) -> SampleVideo:
    """Where the needles of one video are and what they show (a pure function of its arguments)."""
    rng = random.Random(f"{name}-{seed}")
    sites = rng.sample(SITES, needles)
    colours = rng.sample(COLOURS, needles)
    gap = seconds / needles
    out = [Needle(start=round(i * gap + gap * 0.15, 1), end=round(i * gap + gap * 0.15 + min(12.0, gap * 0.6), 1),
                  site=sites[i], code=_code(rng), colour=colours[i], count=rng.randint(2, 4))
           for i in range(needles)]
    return SampleVideo(name, seconds, out)


def sample_video(path: Path, plan: SampleVideo) -> Path:
    """Encode ``plan`` (small frames, 2 fps: quick to make and to ingest)."""
    scenes, overlays, shapes = [], [], []
    t = 0.0
    for i, n in enumerate(plan.needles):
        if n.start > t:
            scenes.append(Scene(t, n.start, PALETTE["gray"]))
        scenes.append(Scene(n.start, n.end, PALETTE[BACKGROUNDS[i % len(BACKGROUNDS)]]))
        overlays += [Overlay(n.start, n.end, n.site, size=0.12, x=0.05, y=0.06),
                     Overlay(n.start, n.end, f"CODE {n.code}", size=0.09, x=0.05, y=0.36)]
        shapes.append(Shape(n.start, n.end, PALETTE[n.colour], count=n.count, x=0.05, y=0.62, size=0.1))
        t = n.end
    if t < plan.seconds:
        scenes.append(Scene(t, plan.seconds, PALETTE["gray"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_video(path, duration=plan.seconds, fps=FPS, width=WIDTH, height=HEIGHT, scenes=scenes,
                       overlays=overlays, shapes=shapes, gop=16)


def _choices(truth: str, pool: list[str], rng: random.Random, k: int = 4) -> tuple[list[str], int]:
    options = [truth, *rng.sample([p for p in pool if p != truth], k - 1)]
    rng.shuffle(options)
    return options, options.index(truth)


def _questions(plan: SampleVideo, rng: random.Random, k: int = 4) -> list[tuple[str, list[str], int, str, Needle]]:
    """(question, options, right index, kind, needle) about each needle: its code and its squares' colour."""
    out = []
    for n in plan.needles:
        codes = [n.code] + [_code(rng) for _ in range(k + 2)]
        options, truth = _choices(n.code, codes, rng, k)
        out.append((f"What code was shown under the {n.site} sign?", options, truth, "code", n))
        options, truth = _choices(n.colour, COLOURS, rng, k)
        out.append((f"What colour were the squares shown at the {n.site}?", options, truth, "colour", n))
    return out


def _write(path: Path, data: object, *, lines: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if lines:
        path.write_text("".join(json.dumps(row) + "\n" for row in data))  # type: ignore[union-attr]
    else:
        path.write_text(json.dumps(data, indent=1))
    return path


def make_sample(benchmark: str, root: Path, *, videos: int = 2, seconds: float = 60.0, seed: int = 0) -> Sample:
    """Write ``benchmark``'s sample under ``root``: its videos in ``root/videos`` and its annotations."""
    root = Path(root)
    rng = random.Random(f"{benchmark}-{seed}")
    plans = [plan_video(f"{benchmark}{i}", seconds, seed) for i in range(videos)]
    writer = {"videomme": _videomme, "lvbench": _lvbench, "mlvu": _mlvu, "egomem": _egomem, "ovobench": _ovobench}
    annotations, names = writer[benchmark](root, plans, rng)
    for plan, name in zip(plans, names, strict=True):
        target = root / "videos" / name
        if not target.exists():
            sample_video(target, plan)
    return Sample(benchmark, annotations, root / "videos", plans)


def _letters(options: list[str]) -> list[str]:
    return [f"{'ABCDEF'[i]}. {o}" for i, o in enumerate(options)]


def _videomme(root: Path, plans: list[SampleVideo], rng: random.Random) -> tuple[Path, list[str]]:
    rows = []
    for i, plan in enumerate(plans):
        vid = f"vmm{i:02d}"
        for j, (text, options, truth, kind, _) in enumerate(_questions(plan, rng)):
            rows.append({"video_id": f"{i + 1:03d}", "duration": "short", "domain": ["Knowledge", "Life Record"][i % 2],
                         "sub_category": ["Geography", "Travel"][i % 2], "url": "", "videoID": vid,
                         "question_id": f"{i + 1:03d}-{j + 1}",
                         "task_type": "OCR Problems" if kind == "code" else "Attribute Perception",
                         "question": text, "options": _letters(options), "answer": "ABCD"[truth]})
    rows.append({**rows[0], "question_id": "999-1", "answer": "E"})  # a letter with no such option
    return _write(root / "videomme.json", rows), [f"vmm{i:02d}.mp4" for i in range(len(plans))]


def _lvbench(root: Path, plans: list[SampleVideo], rng: random.Random) -> tuple[Path, list[str]]:
    lines, uid = [], 0
    for i, plan in enumerate(plans):
        qa = []
        for text, options, truth, kind, n in _questions(plan, rng):
            uid += 1
            body = text + "".join(f"\n({'ABCD'[k]}) {o}" for k, o in enumerate(options))
            types = ["key information retrieval"] if kind == "code" else ["entity recognition", "event understanding"]
            qa.append({"uid": str(uid), "question": body, "answer": "ABCD"[truth], "question_type": types,
                       "time_reference": f"00:{int(n.start):02d}-00:{int(n.end):02d}"})
        lines.append({"key": f"lvb{i:02d}", "type": "documentary", "qa": qa})
    lines[0]["qa"].append({**lines[0]["qa"][0], "uid": "9999", "answer": ""})  # an empty answer
    return _write(root / "video_info.meta.jsonl", lines, lines=True), [f"lvb{i:02d}.mp4" for i in range(len(plans))]


def _mlvu(root: Path, plans: list[SampleVideo], rng: random.Random) -> tuple[Path, list[str]]:
    tasks: dict[str, list[dict[str, object]]] = {"2_needle.json": [], "3_ego.json": []}
    for i, plan in enumerate(plans):
        for text, options, truth, kind, _ in _questions(plan, rng):
            file = "2_needle.json" if kind == "code" else "3_ego.json"
            tasks[file].append({"video": f"mlvu{i:02d}.mp4", "duration": plan.seconds, "question": text,
                                "candidates": options, "answer": options[truth],
                                "question_type": "needle" if kind == "code" else "ego"})
    tasks["3_ego.json"].append({**tasks["3_ego.json"][0], "answer": "mauve"})  # no such candidate
    folder = root / "json"
    for name, rows in tasks.items():
        _write(folder / name, rows)
    # The test split: six candidates, question ids, no answers (submission only).
    test = []
    for i, plan in enumerate(plans):
        for j, (text, options, _truth, kind, _) in enumerate(_questions(plan, rng, k=6)):
            test.append({"video": f"mlvu{i:02d}.mp4", "duration": plan.seconds, "question": text,
                         "candidates": options, "question_type": "needle" if kind == "code" else "ego",
                         "question_id": f"{'NQA' if kind == 'code' else 'EGO'}_{i * 10 + j}"})
    _write(root / "test" / "test_question.json", test)
    return folder, [f"mlvu{i:02d}.mp4" for i in range(len(plans))]


def _egomem(root: Path, plans: list[SampleVideo], rng: random.Random) -> tuple[Path, list[str]]:
    rows, starts = [], {}
    for i, plan in enumerate(plans):
        vid = f"A{i + 1}_TEST_DAY1"
        start = 11 * 3600 + 5 * 60 * i
        starts[vid] = f"{start // 3600:02d}:{start % 3600 // 60:02d}:00"
        for j, (text, options, truth, kind, n) in enumerate(_questions(plan, rng)):
            if kind == "colour":  # an Event question: when, in wall-clock time
                at = start + int((n.start + n.end) / 2)
                text = (f"Around {at // 3600:02d}:{at % 3600 // 60:02d}:{at % 60:02d}, what colour were the squares "
                        f"shown at the {n.site}?")
            rows.append({"videoID": vid, "question_id": str(j), "type": "Detail" if kind == "code" else "Event",
                         "question": text, "options": _letters(options), "answer": "ABCD"[truth]})
    rows.append({**rows[0], "question_id": "99", "answer": ""})  # an empty answer
    _write(root / "start_times.json", starts)
    return _write(root / "EgoMem.json", rows), [f"A{i + 1}_TEST_DAY1.mp4" for i in range(len(plans))]


def _ovobench(root: Path, plans: list[SampleVideo], rng: random.Random) -> tuple[Path, list[str]]:
    data: dict[str, list[dict[str, object]]] = {"backward": [], "realtime": [], "forward": []}
    ident = 0
    for i, plan in enumerate(plans):
        video = f"src/ovo{i:02d}.mp4"
        first, second = plan.needles[0], plan.needles[-1]
        codes = [first.code] + [_code(rng) for _ in range(3)]
        options, truth = _choices(first.code, codes, rng)
        ident += 1  # backward: asked once the first needle is gone
        data["backward"].append({"id": ident, "video": video, "task": "EPM", "realtime": second.start,
                                 "question": f"What code was shown under the {first.site} sign?",
                                 "options": options, "gt": truth})
        options, truth = _choices(second.colour, COLOURS, rng)
        ident += 1  # real-time: asked while the second needle is on screen
        data["realtime"].append({"id": ident, "video": video, "task": "OCR", "realtime": second.end - 2.0,
                                 "question": f"What colour are the squares shown at the {second.site} now?",
                                 "options": options, "gt": truth})
        ident += 1  # forward: can "what code is under the second sign" be answered yet? (no before, yes after)
        data["forward"].append({"id": ident, "video": video, "task": "CRR",
                                "question": f"What code is shown under the {second.site} sign?", "answer": second.code,
                                "test_info": [{"realtime": second.start - 4.0, "type": 0},
                                              {"realtime": second.end - 1.0, "type": 1}]})
    data["realtime"].append({**data["realtime"][0], "id": 999, "gt": 7})  # gt names no option
    return _write(root / "ovo_bench_new.json", data), [f"src/ovo{i:02d}.mp4" for i in range(len(plans))]


def main(argv: list[str] | None = None) -> int:
    """``python -m lucy.eval.samples DIR [BENCHMARK...]``: write samples (default: all five) under DIR."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m lucy.eval.samples DIR [videomme lvbench mlvu egomem ovobench]", file=sys.stderr)
        return 2
    root = Path(args[0])
    for benchmark in args[1:] or ["videomme", "lvbench", "mlvu", "egomem", "ovobench"]:
        sample = make_sample(benchmark, root / benchmark)
        print(f"{benchmark}: annotations {sample.annotations}, videos {sample.videos}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
