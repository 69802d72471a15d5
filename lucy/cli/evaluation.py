"""``lucy eval``: a benchmark's own annotation file answered by Lucy, scored and printed as its paper does
(:mod:`lucy.eval`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from lucy.cli.common import ConfigOption, DataOption, JsonOption, VerboseOption, load
from lucy.config.names import Benchmark


def evaluate(benchmark: Annotated[Benchmark, typer.Argument(help="Which benchmark's format ANNOTATIONS is in.")],
             annotations: Annotated[Path, typer.Argument(
                 metavar="ANNOTATIONS", show_default=False,
                 help="The benchmark's annotation file (MLVU dev: its folder of per-task JSON files).")],
             videos: Annotated[Path, typer.Option(help="Folder holding the benchmark's videos.",
                                                  show_default=False)],
             out: Annotated[Path | None, typer.Option(
                 help="Data directory, predictions, report and submission file (default lucy-eval/BENCHMARK).",
                 show_default=False)] = None,
             limit: Annotated[int | None, typer.Option(min=1, help="Ask at most this many questions (file order).",
                                                       show_default=False)] = None,
             parallel: Annotated[int, typer.Option(min=1, help="Videos processed at once.")] = 1,
             resume: Annotated[bool, typer.Option(
                 "--resume", help="Skip questions already in the predictions file.")] = False,
             while_ingesting: Annotated[bool, typer.Option(
                 "--while-ingesting",
                 help="Ask each question at its video's midpoint and end while it is ingested (paced).")] = False,
             pace: Annotated[float, typer.Option(min=0.01, help="Ingest speed while asking during ingest, x real "
                                                 "time.")] = 1.0,
             subtitles: Annotated[Path | None, typer.Option(
                 help="Video-MME: folder of <videoID>.srt files (the with-subtitles setting).",
                 show_default=False)] = None,
             as_json: JsonOption = False, data: DataOption = None, config: ConfigOption = None,
             verbose: VerboseOption = 0) -> int:
    """Evaluate Lucy on a benchmark (Video-MME, LVBench, MLVU, EgoMem, OVO-Bench): ingest each video once, ask
    its questions, print the paper's tables with costs and a confident-vs-forced split."""
    settings = load(data, config, None, verbose)
    from lucy.eval import render, run  # the engine and its backends: loaded when a run starts

    report = run(benchmark, annotations, videos, out, limit=limit, parallel=parallel, resume=resume,
                 while_ingesting=while_ingesting, settings=settings, pace=pace, subtitles=subtitles)
    print(json.dumps(report, indent=1) if as_json else render(report))
    return 0
