"""The licences of the files behind /docs and /redoc (Swagger UI, Apache-2.0; ReDoc, MIT; the libraries bundled in
each) ship with Lucy and are served beside the pages: the wheel that vendors the files ships none of those texts.
The sha256 sums in the notice pin the served files, so a new fastapi-offline with other bundles fails here until
the notice and licences are brought up to date."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tomllib
from importlib import resources
from pathlib import Path

from starlette.testclient import TestClient

from lucy.config import load_settings
from lucy.service.routes import docs

ROOT = Path(__file__).resolve().parents[2]
POINTER = re.compile(rb"For license information please see (\S+)")


def _sums() -> dict[str, str]:
    lines = (docs.LICENCES / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split() for line in lines if line.strip())}


def test_the_served_docs_assets_are_the_files_the_notice_names() -> None:
    served = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in docs.FILES.iterdir() if f.is_file()}
    assert served == _sums()  # every served file named, none changed, none added
    notice = (docs.LICENCES / "NOTICE").read_text()
    for name in served:
        assert name in notice, name


def test_the_licences_ship_with_the_package_and_are_served_beside_the_bundles(tmp_path: Path) -> None:
    shipped = sorted(f.name for f in docs.LICENCES.iterdir() if f.is_file())
    assert set(docs.LICENCE_FILES) | {"SHA256SUMS"} == set(shipped)
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["lucy.service"]
    for name in shipped:  # in the wheel, not only in this checkout
        assert any(fnmatch.fnmatch(f"docs_licences/{name}", g) for g in globs), (name, globs)

    from lucy.service.app import create_app

    with TestClient(create_app(load_settings(data=tmp_path / "data")), base_url="http://127.0.0.1") as client:
        for bundle in ("swagger-ui-bundle.js", "redoc.standalone.js"):
            first = client.get(f"{docs.ASSETS}/{bundle}").content.split(b"\n", 1)[0]
            pointer = POINTER.search(first)
            assert pointer is not None, first
            # the bundle's own pointer, relative to the bundle's URL, resolves to the licences of what it bundles
            listed = client.get(f"{docs.ASSETS}/{pointer.group(1).decode()}")
            assert listed.status_code == 200 and listed.headers["content-type"].startswith("text/plain")
            assert listed.text == (resources.files("lucy.service") / "docs_licences" / f"{bundle}.LICENSE.txt"
                                   ).read_text(encoding="utf-8")
            assert "MIT" in listed.text
        everything = client.get("/docs/licences")
        assert everything.status_code == 200 and everything.headers["content-type"].startswith("text/plain")
        for words in ("Apache License", "Version 2.0, January 2004", "SmartBear Software", "Rebilly, Inc.",
                      "Neal Turett", "Sebastián Ramírez", "@license DOMPurify", "swagger-ui-dist 5.32.6"):
            assert words in everything.text, words
        assert client.get(f"{docs.ASSETS}/favicon.png.LICENSE.txt").status_code == 404  # only the bundles' names
        assert client.get(f"{docs.ASSETS}/swagger-ui.css").status_code == 200  # the assets' mount still answers


def test_redoc_is_served_without_its_cdn_logo_and_otherwise_unchanged(tmp_path: Path) -> None:
    """ReDoc's sidebar loads Redocly's logo from a CDN, which the page's policy refused (a console error on every
    /redoc, and a request off the machine where the policy allowed it): the bundle is served with that address
    emptied and every other byte the package's."""
    from lucy.service.app import create_app

    shipped = (docs.FILES / "redoc.standalone.js").read_bytes()
    assert shipped.count(b"https://cdn.redoc.ly/") == 1  # the logo, the bundle's only address it loads by itself
    with TestClient(create_app(load_settings(data=tmp_path / "data")), base_url="http://127.0.0.1") as client:
        served = client.get(f"{docs.ASSETS}/redoc.standalone.js")
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/javascript")
    assert b"cdn.redoc.ly" not in served.content
    assert served.content == shipped.replace(b'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"', b'src:""')
