"""Credentials out of every line Lucy shows: URLs' passwords and secret query values, and a log handler that
hides them in every record and traceback.

Its own module, on the standard library alone, because every ``lucy`` command sets up its logging with it before
anything else: importing it from :mod:`lucy.ingest.source` (PyAV, NumPy) cost each ``lucy ask`` a second.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

# The password runs to the last "@" on the line before the next URL: FFmpeg accepts an unescaped "@", "/" or
# space in it, and none of them may leave the rest of the secret on show (over-redacting an odd line is the safe
# side to err on). The user name may hold spaces too. A user name without a password may itself be the secret
# (https://TOKEN@host): then all of it is hidden.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\n]*)"
                       r"(?P<password>:(?:(?![a-zA-Z][a-zA-Z0-9+.-]*://)[^\n])*)?@")
# Query parameters that carry secrets in camera, CDN and SRT URLs (?token=, &api_key=, &X-Amz-Signature=, &pwd=,
# &passphrase=, &sessionid=...): a secret word anywhere in the name (a harmless &keyframes= is hidden too).
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;][\w.-]*?(?:token|key|secret|pass|pwd|auth|sig|credential|session|jwt)[\w.-]*=)"
    r"[^&#;\s]+", re.IGNORECASE)


def redact_url(text: str) -> str:
    """Hide credentials of every URL in ``text``: ``rtsp://user:pw@host/s?token=abc`` ->
    ``rtsp://user:***@host/s?token=***``."""
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@" if m["password"] else f"{m['scheme']}***@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m['name']}***", text)


def _secret_pieces(source: str) -> list[str]:
    """The parts of ``source``'s password (its user name when it has none) and of its secret query values, split
    at the characters a parser may stop at, as given and percent-decoded: what a message might quote of them."""
    pieces: list[str] = []
    if (m := _USERINFO.match(source)) is not None:
        secret = m["password"][1:] if m["password"] else m["user"]
        pieces += [secret, *re.split(r"[:#/?@]", secret)]
    pieces += [v.split("=", 1)[1] for v in (m[0] for m in _SECRET_PARAM.finditer(source))]
    pieces += [unquote(p) for p in pieces]
    return sorted({p for p in pieces if p.strip()}, key=len, reverse=True)


def redact_source(text: str, source: str) -> str:
    """:func:`redact_url`, and every piece of ``source``'s own secrets hidden wherever it stands on its own (a
    parser's message may quote the start of a password that a '#' cut: "... as 'pa'", with no URL around it)."""
    text = redact_url(text)
    for piece in _secret_pieces(source):
        text = re.sub(rf"(?<![^\W_]){re.escape(piece)}(?![^\W_])", "***", text)
    return text


class RedactingFilter(logging.Filter):
    """Attach to log handlers so that no log line, nor the traceback under it, carries stream credentials
    (``source``: the one stream whose own secrets are hidden too, see :func:`redact_source`)."""

    def __init__(self, source: str | None = None) -> None:
        super().__init__()
        self._source = source

    def _redact(self, text: str) -> str:
        return redact_url(text) if self._source is None else redact_source(text, self._source)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            # A formatter prints exc_text when set: the traceback's exception message may quote a URL.
            record.exc_text = self._redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = self._redact(record.stack_info)
        return True


def redacting_handler(source: str | None = None) -> logging.Handler:
    """Lucy's log handler: ``lucy: LEVEL: message`` on stderr, credentials redacted (``source``'s own too)."""
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter(source))
    handler.setFormatter(logging.Formatter("lucy: %(levelname)s: %(message)s"))
    return handler
