"""Errors that reach users as one clear line (the CLI prints them without a traceback)."""

import errno
import sqlite3


class LucyError(Exception):
    """A failure caused by input or environment, with a message meant for the user."""


class SourceError(LucyError):
    """A source cannot be opened or read (missing file, not a video, unreachable stream...)."""


class StoreError(LucyError):
    """The data directory cannot hold what was asked (bad stream name, conflicting source...)."""


class InputError(LucyError, ValueError):
    """What a user typed cannot be used (a question empty once invisible characters are removed, duplicate
    options). A ValueError too, so that pydantic validators at the HTTP edge turn it into a 422."""


class WebhookRefused(InputError):
    """A webhook URL names a host that webhooks may not go to (cloud metadata, link-local, not an allowed host...)."""


class StreamError(LucyError):
    """The stream runtime (:mod:`lucy.runtime`) refuses a request about a stream. Raised below the service, which
    alone turns each kind into an HTTP status (:func:`lucy.service.errors.domain_error`)."""


class StreamNotFound(StreamError):
    """No stream of that name runs here or is stored in the data directory."""


class StreamConflict(StreamError):
    """The stream cannot be started or removed as things stand: it already runs, its name holds another source,
    another process writes it, or the runtime runs as many streams as it may."""


class InvalidStream(StreamError):
    """What was asked of a stream cannot be used: a bad name, source, preset, captioner or retention ages."""


class ModelFileError(LucyError):
    """A model file that Lucy ships (lucy/perception/models) is missing or damaged; the message says which file and
    how to get it back."""


class ModelBuildError(ModelFileError):
    """A model file cannot be built at set-up from its registry package (:mod:`lucy.perception.modelbuild`): the
    package cannot be fetched, a file in it or the result has another hash, or the graph uses an op the converter
    does not know."""


_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})  # a quota is a full disk to its user
_PG_DISK_FULL = "53100"  # PostgreSQL's disk_full SQLSTATE


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err``, or an error it was raised from, says that a disk is full: a write of the frame store (an
    OSError, raised through zarr) or of the memory store (SQLite's SQLITE_FULL, PostgreSQL's disk_full)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_FULL_ERRNOS:
            return True
        if getattr(current, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return True
        if getattr(current, "sqlstate", None) == _PG_DISK_FULL:
            return True
        current = current.__cause__ or current.__context__
    return False
