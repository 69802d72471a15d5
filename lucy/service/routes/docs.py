"""The API's documentation pages, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, served from Lucy's own files.

FastAPI's default pages load both from a CDN, so on a machine without internet (a camera network, a lab) they are
blank, though the dashboard links to them. The assets come from the ``fastapi-offline`` package (Swagger UI's
``swagger-ui-dist`` and ReDoc's standalone bundle, vendored in a wheel), mounted under :data:`ASSETS`; the pages are
FastAPI's own (``get_swagger_ui_html`` / ``get_redoc_html``, as FastAPI documents for self-hosting). Swagger's page
starts it with a small inline script: each page sends a Content-Security-Policy that allows exactly its inline
scripts by their sha256 (:func:`lucy.service.headers.docs_policy`), never ``'unsafe-inline'`` scripts.

Swagger UI is Apache-2.0 and ReDoc MIT, and each bundle carries libraries of their own licences; the wheel that
vendors them ships none of those texts, so Lucy ships them (``lucy/service/docs_licences``, with a NOTICE that says
where each file comes from and the sha256 of each served asset) and serves them: ``/docs/licences``, and each
bundle's ``<bundle>.LICENSE.txt`` where its first line points (beside the bundle).

ReDoc's sidebar always shows Redocly's logo from Redocly's CDN (no option turns it off): the page's policy refused
it, and every /redoc logged that refusal as a console error. The bundle is served with that one URL emptied
(:func:`redoc_bundle`): an image with no source asks nothing of anyone and ReDoc hides it; the "API docs by
Redocly" link stays.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib import resources

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from lucy.service.errors import NotFound
from lucy.service.headers import docs_policy

router = APIRouter(include_in_schema=False)

ASSETS = "/docs/static"  # not under /static: that mount (the dashboard's files) would answer first
FILES = resources.files("fastapi_offline") / "static"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
# an inline script (a <script> element without src) and its text
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
LICENCES = resources.files("lucy.service") / "docs_licences"
# The bundles whose first line says "For license information please see <bundle>.LICENSE.txt" (a relative URL).
BUNDLE_LICENCES = ("swagger-ui-bundle.js.LICENSE.txt", "redoc.standalone.js.LICENSE.txt")
# What /docs/licences shows, in this order: where the files come from, then each licence text.
LICENCE_FILES = ("NOTICE", "LICENSE-swagger-ui", "NOTICE-swagger-ui", "LICENSE-redoc", "LICENSE-fastapi-offline",
                 "LICENSE-fastapi", *BUNDLE_LICENCES)
REDOC_BUNDLE = "redoc.standalone.js"
# The one address of another origin that ReDoc's bundle loads by itself: the logo beside "API docs by Redocly".
REDOC_LOGO = b'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'


def mount_assets(app: FastAPI) -> None:
    """Serve the Swagger UI and ReDoc bundles under :data:`ASSETS` (a mount: routers cannot carry one)."""
    app.mount(ASSETS, StaticFiles(directory=str(FILES)), name="docs-assets")


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    """``page`` with a policy that allows its own inline scripts (by hash) and nothing from elsewhere."""
    body = bytes(page.body).decode()
    hashes = [base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in INLINE_SCRIPT.findall(body)]
    page.headers["content-security-policy"] = docs_policy(hashes)
    return page


def _licence(name: str) -> str:
    return (LICENCES / name).read_text(encoding="utf-8")


@router.get("/docs/licences", response_class=PlainTextResponse)
async def licences() -> PlainTextResponse:
    """The notice of the documentation pages' files and every licence that applies to them, as plain text."""
    parts = [f"==> {name} <==\n{_licence(name).rstrip()}\n" for name in LICENCE_FILES]
    return PlainTextResponse("\n".join(parts))


# A route, not a file of the mount: the route is matched first (routers are attached before the mounts).
@router.get(ASSETS + "/{name}.LICENSE.txt", response_class=PlainTextResponse)
async def bundle_licence(name: str) -> PlainTextResponse:
    """The licences of the libraries inside a bundle, where the bundle's first line says they are."""
    file = f"{name}.LICENSE.txt"
    if file not in BUNDLE_LICENCES:
        raise NotFound(f"no licence file {file!r}: the bundles' are {', '.join(BUNDLE_LICENCES)}")
    return PlainTextResponse(_licence(file))


@cache
def redoc_bundle() -> bytes:
    """ReDoc's bundle as served: the package's file with the CDN address of its sidebar logo emptied (an ``<img>``
    without a source loads nothing; ReDoc's error handler hides it). A bundle without that address is refused: a
    new ReDoc needs this looked at again (the sums in the notice already fail the tests first)."""
    bundle = (FILES / REDOC_BUNDLE).read_bytes()
    if bundle.count(REDOC_LOGO) != 1:
        raise RuntimeError(f"{REDOC_BUNDLE}: its logo address is not where Lucy expects it")
    return bundle.replace(REDOC_LOGO, b'src:""')


# A route, not the mount's file: routes are matched first.
@router.get(f"{ASSETS}/{REDOC_BUNDLE}")
async def redoc_script() -> Response:
    return Response(redoc_bundle(), media_type="text/javascript; charset=utf-8",
                    headers={"cache-control": "public, max-age=3600"})


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
        redoc_js_url=f"{root}{ASSETS}/{REDOC_BUNDLE}", redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
        with_google_fonts=False))
