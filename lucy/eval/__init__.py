"""``lucy eval``: VideoLucy's benchmarks (Video-MME, LVBench, MLVU, EgoMem) and the online OVO-Bench, read from
their own annotation files, answered by Lucy's engine, scored as their papers print them.

- :mod:`lucy.eval.formats`: the five annotation formats -> :class:`~lucy.eval.formats.EvalQuestion`;
- :mod:`lucy.eval.runner`: ingest each video once, ask its questions (or ask while ingesting), write predictions;
- :mod:`lucy.eval.letters`: option letters from prose replies;
- :mod:`lucy.eval.tables`: the papers' tables, costs, confidence split, submission files;
- :mod:`lucy.eval.subtitles`: Video-MME's subtitle files as speech memory;
- :mod:`lucy.eval.samples`: small samples of each format around synthetic videos with known answers.

``lucy eval videomme ANNOTATIONS --videos DIR`` runs one; :func:`run` is the same from Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lucy.config import LucySettings
from lucy.eval.formats import BENCHMARKS, EvalQuestion, FormatError, read_annotations
from lucy.eval.runner import Progress, execute
from lucy.eval.tables import build_report, render, write_submission

__all__ = ["BENCHMARKS", "EvalQuestion", "FormatError", "read_annotations", "render", "run"]


def run(benchmark: str, annotations: str | Path, videos: str | Path, out: str | Path | None = None, *,
        limit: int | None = None, parallel: int = 1, resume: bool = False, while_ingesting: bool = False,
        settings: LucySettings | None = None, pace: float = 1.0, subtitles: str | Path | None = None,
        progress: Progress | None = None) -> dict[str, Any]:
    """Evaluate Lucy on ``benchmark`` and return the report (also written to ``OUT/<run>.report.json``).

    ``out`` (default ``lucy-eval/<benchmark>``) holds the data directory, predictions, report and submission
    file; ``settings`` the backends (default: lucy.toml, LUCY_* variables); ``pace``: how fast a video is
    ingested while questions are asked during ingest (x real time); ``subtitles``: Video-MME's folder of
    ``<videoID>.srt`` files, stored as each video's speech memory (the "with subtitles" setting).
    """
    state = execute(benchmark, annotations, videos, out, limit=limit, parallel=parallel, resume=resume,
                    while_ingesting=while_ingesting, settings=settings, pace=pace, subtitles=subtitles,
                    progress=progress)
    report = build_report(state)
    submission = write_submission(state, state.out)
    report["submission"] = str(submission) if submission else None
    path = state.predictions_path.with_name(state.predictions_path.name.replace(".predictions.jsonl", ".report.json"))
    path.write_text(json.dumps(report, indent=1))
    report["report"] = str(path)
    return report
