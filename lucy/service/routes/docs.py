"""The API's documentation pages, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, served from Lucy's own files.

FastAPI's default pages load both from a CDN, so on a machine without internet (a camera network, a lab) they are
blank, though the dashboard links to them. The assets come from the ``fastapi-offline`` package (Swagger UI's
``swagger-ui-dist`` and ReDoc's standalone bundle, vendored in a wheel), mounted under :data:`ASSETS`; the pages are
FastAPI's own (``get_swagger_ui_html`` / ``get_redoc_html``, as FastAPI documents for self-hosting). Swagger's page
starts it with a small inline script: each page sends a Content-Security-Policy that allows exactly its inline
scripts by their sha256 (:func:`lucy.service.headers.docs_policy`), never ``'unsafe-inline'`` scripts.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from lucy.service.headers import docs_policy

router = APIRouter(include_in_schema=False)

ASSETS = "/docs/static"  # not under /static: that mount (the dashboard's files) would answer first
FILES = resources.files("fastapi_offline") / "static"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
# an inline script (a <script> element without src) and its text
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def mount_assets(app: FastAPI) -> None:
    """Serve the Swagger UI and ReDoc bundles under :data:`ASSETS` (a mount: routers cannot carry one)."""
    app.mount(ASSETS, StaticFiles(directory=str(FILES)), name="docs-assets")


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    """``page`` with a policy that allows its own inline scripts (by hash) and nothing from elsewhere."""
    body = bytes(page.body).decode()
    hashes = [base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in INLINE_SCRIPT.findall(body)]
    page.headers["content-security-policy"] = docs_policy(hashes)
    return page


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    app = request.app
    return _with_policy(get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI", oauth2_redirect_url=OAUTH2_REDIRECT,
        swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS}/favicon.png", swagger_ui_parameters=app.swagger_ui_parameters))


@router.get(OAUTH2_REDIRECT)
async def swagger_ui_redirect() -> HTMLResponse:
    return _with_policy(get_swagger_ui_oauth2_redirect_html())


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    app = request.app
    return _with_policy(get_redoc_html(
        openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
        redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js", redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
        with_google_fonts=False))
