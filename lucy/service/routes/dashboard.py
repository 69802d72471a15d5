"""The live dashboard: one static page and its script (not part of the API schema)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

router = APIRouter(include_in_schema=False)

STATIC = resources.files("lucy.service") / "static"


@router.get("/")
async def dashboard() -> FileResponse:
    return FileResponse(str(STATIC / "index.html"), media_type="text/html", headers={"Cache-Control": "no-cache"})


def mount_static(app: FastAPI) -> None:
    """Serve the dashboard's files under ``/static`` (a mount: routers cannot carry one)."""
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
