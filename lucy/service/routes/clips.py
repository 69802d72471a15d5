"""Clips: ``GET /v1/streams/{name}/clip?from=&to=``, a playable MP4 of a stream between two media times, made as
:func:`lucy.ingest.clips.make_clip` makes it (from the recording, the source file, or the stored frames) and kept a
while to serve again (:class:`lucy.ingest.clips.ClipCache`: a browser asks for a clip several times as it plays
it); and ``GET /v1/streams/{name}/recordings``, the stream's recorded segments (what a timeline draws as recording
coverage)."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from lucy.errors import StreamNotFound
from lucy.ingest.segments import list_segments
from lucy.service.state import service

router = APIRouter(tags=["streams"])

FromQ = Annotated[float, Query(alias="from", description="Media seconds where the clip starts (cut from a recording, "
                                                         "it holds the pictures from the keyframe before it, kept out "
                                                         "of view by an edit list).", examples=[60.0])]
ToQ = Annotated[float, Query(alias="to", description="Media seconds where the clip ends.", examples=[120.0])]


@router.get("/v1/streams/{name}/clip", response_class=FileResponse,
            summary="A playable MP4 of the stream from `from` to `to` (media seconds)",
            responses={200: {"content": {"video/mp4": {}},
                             "description": "The clip; X-Lucy-Clip-Origin says what it was cut from (recording, "
                                            "source, frames), X-Lucy-Clip-Start and -End its media times."},
                       404: {"description": "Unknown stream, or nothing stored in that period"},
                       422: {"description": "to not after from, a negative time, or longer than "
                                            "recording.max_clip_seconds"}})
async def get_clip(name: str, request: Request, start: FromQ, end: ToQ) -> FileResponse:
    svc = service(request)
    fd, name_of_file = tempfile.mkstemp(prefix="lucy-clip-", suffix=".mp4")
    os.close(fd)
    scratch = Path(name_of_file)
    try:
        made, kept = await asyncio.to_thread(svc.clips.clip, svc.frames, svc.settings.data, name, start, end,
                                             max_seconds=svc.settings.recording.max_clip_seconds, scratch=scratch)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    # A kept clip is the same clip until its footage changes (then it has another name): the browser may keep it
    # too. One made of a period still coming in is not.
    return FileResponse(made.path, media_type="video/mp4", filename=made.filename, content_disposition_type="inline",
                        headers={"X-Lucy-Clip-Origin": made.origin, "X-Lucy-Clip-Start": f"{made.start:.3f}",
                                 "X-Lucy-Clip-End": f"{made.end:.3f}",
                                 "Cache-Control": "private, max-age=300" if kept else "no-store"},
                        background=BackgroundTask(scratch.unlink, missing_ok=True))


@router.get("/v1/streams/{name}/recordings", summary="The stream's recorded segments, oldest first",
            responses={404: {"description": "Unknown stream"}})
async def get_recordings(name: str, request: Request) -> dict[str, Any]:
    svc = service(request)

    def listed() -> dict[str, Any]:
        if not svc.frames.exists(name):
            raise StreamNotFound(f"no stream {name!r} is stored here")
        segments = list_segments(svc.settings.data, name, include_open=True)
        return {"stream": name, "segments": [
            {"start": round(s.start, 3), "end": None if s.end is None else round(s.end, 3), "bytes": s.size,
             "open": s.open} for s in segments]}

    return await asyncio.to_thread(listed)
