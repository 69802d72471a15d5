"""Frames in an S3 bucket: the Zarr frame store (:mod:`lucy.ingest.zarr_store`) over zarr's ``ObjectStore`` on
``obstore``, one group per stream under ``s3://bucket/prefix/<stream>/``.

The layout and the commit protocol are the local store's: an S3 PUT replaces an object whole (a reader sees the
old object or the new one, never part of one), each frame is its own object, and the group's ``zarr.json``
(which holds ``committed``) is written after the frames and times it commits. What the local store does with
files, this root does with objects:

- creating a stream: its group is built in memory, its arrays' objects are put first and the group's
  ``zarr.json`` last, with ``If-None-Match`` (a conditional PUT), so the stream appears whole and two creators
  cannot both win;
- deleting a stream: the group's ``zarr.json`` goes first (readers and :meth:`S3Root.exists` see the stream gone),
  then every object under its prefix;
- listing streams: the prefixes under the root that hold a group with a frames array.

Not supported on S3 yet (each says so with a :class:`StoreError`): retention (thinning, deleting old frames and
the byte count it keeps; use the bucket's lifecycle rules). The one-writer lock is still the data directory's
local file lock (:mod:`lucy.ingest.lock`): it excludes writers on one machine only.

A failed request is retried by obstore (server down, timeouts, 5xx) for ``frames.s3_retry_seconds``; what still
fails becomes one :class:`StoreError` that names the bucket and the endpoint, never the secret.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import obstore
import obstore.exceptions
from obstore.store import S3Store
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import MemoryStore, ObjectStore, StorePath

from lucy.errors import StoreError
from lucy.ingest.frames import RetentionState, check_stream_name

if TYPE_CHECKING:
    from lucy.config.settings import FrameSettings

_DELETE_BATCH = 1000  # keys per DeleteObjects request (the S3 limit)


class S3Error(StoreError):
    """The S3 frame store refused a request or could not be reached."""


class _Explain:
    """Turns obstore's errors into one clear line: which bucket, which endpoint, what went wrong."""

    def __init__(self, where: str, secret: str) -> None:
        self.where = where
        self._secret = secret

    def __call__(self, err: Exception, doing: str) -> S3Error:
        if isinstance(err, (obstore.exceptions.UnauthenticatedError, obstore.exceptions.PermissionDeniedError)):
            why = "it refused the credentials (check frames.s3_access_key_id and frames.s3_secret_access_key)"
        else:
            text = str(err)
            if "403" in text and ("SignatureDoesNotMatch" in text or "AccessDenied" in text
                                  or "InvalidAccessKeyId" in text):
                why = "it refused the credentials (check frames.s3_access_key_id and frames.s3_secret_access_key)"
            elif "error sending request" in text or "Connect" in text or "timed out" in text.lower():
                why = "it cannot be reached (is the server up? check frames.s3_endpoint)"
            elif "NoSuchBucket" in text:
                why = "the bucket does not exist"
            else:
                why = text.splitlines()[0][:300] if text else type(err).__name__
        message = f"S3 frame store {self.where}: {doing} failed: {why}"
        if self._secret:
            message = message.replace(self._secret, "***")
        return S3Error(message)

    @contextlib.contextmanager
    def guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except obstore.exceptions.BaseError as err:
            if isinstance(err, FileNotFoundError):
                raise
            raise self(err, doing) from None


class _ZarrObjects(ObjectStore[S3Store]):
    """zarr's ObjectStore whose failures (after obstore's retries) are one clear :class:`S3Error`."""

    explain: _Explain

    def __init__(self, store: S3Store, *, read_only: bool = False, explain: _Explain | None = None) -> None:
        super().__init__(store, read_only=read_only)
        self.explain = explain or _Explain("(unnamed)", "")

    def with_read_only(self, read_only: bool = False) -> _ZarrObjects:
        return type(self)(self.store, read_only=read_only, explain=self.explain)

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        with self.explain.guard(f"reading {key}"):
            return await super().get(key, prototype, byte_range)

    async def get_partial_values(self, prototype: BufferPrototype,
                                 key_ranges: Any) -> list[Buffer | None]:
        with self.explain.guard("reading"):
            return await super().get_partial_values(prototype, key_ranges)

    async def exists(self, key: str) -> bool:
        with self.explain.guard(f"looking up {key}"):
            return await super().exists(key)

    async def set(self, key: str, value: Buffer) -> None:
        with self.explain.guard(f"writing {key}"):
            await super().set(key, value)

    async def delete(self, key: str) -> None:
        with self.explain.guard(f"deleting {key}"):
            await super().delete(key)


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``)."""
    if not url.startswith("s3://"):
        raise StoreError(f"not an s3:// url: {url!r}")
    bucket, _, prefix = url[5:].partition("/")
    if not bucket:
        raise StoreError(f"no bucket in {url!r}")
    return bucket, prefix.strip("/")


class S3Place:
    """One stream's group in the bucket (see :class:`lucy.ingest.zarr_store.StreamPlace`)."""

    def __init__(self, root: S3Root, name: str) -> None:
        self.root = root
        self.name = name
        self.where = f"{root.url}/{name}"

    def zarr(self, sub: str = "") -> StorePath:
        return StorePath(self.root.zarr_store, f"{self.name}/{sub}" if sub else self.name)

    def read_meta(self) -> bytes:
        return self.root.get(f"{self.name}/zarr.json")

    def retention(self, store: Any) -> NoRetention:
        return NoRetention(self.where)


class NoRetention:
    """Retention on a store that has none yet: nothing was deleted, and deleting is refused."""

    def __init__(self, where: str) -> None:
        self.where = where

    def _refuse(self) -> S3Error:
        return S3Error(f"retention is not supported on the S3 frame store yet ({self.where}): "
                       "use the bucket's lifecycle rules")

    def state(self) -> RetentionState:
        return RetentionState()

    def stored_bytes(self) -> int:
        raise self._refuse()

    def save_accounting(self) -> None:
        """Nothing is counted, so nothing is saved."""

    def thin_before(self, t: float, keep_fps: float) -> int:
        raise self._refuse()

    def drop_before(self, t: float) -> int:
        raise self._refuse()


class S3Root:
    """The streams under ``s3://bucket/prefix`` (see :class:`lucy.ingest.zarr_store.FrameRoot`)."""

    def __init__(self, url: str, *, endpoint: str = "", region: str = "us-east-1", access_key_id: str = "",
                 secret_access_key: str = "", retry_seconds: float = 30.0, timeout_seconds: float = 30.0) -> None:
        bucket, prefix = parse_s3_url(url)
        self.url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self.endpoint = endpoint
        self.describe = f"{self.url} ({endpoint})" if endpoint else self.url
        config: dict[str, Any] = {"region": region}
        if endpoint:
            config["endpoint"] = endpoint
        if access_key_id:
            config["access_key_id"] = access_key_id
        if secret_access_key:
            config["secret_access_key"] = secret_access_key
        self.explain = _Explain(self.describe, secret_access_key)
        timeout = datetime.timedelta(seconds=timeout_seconds)
        retry = {"max_retries": 1_000_000 if retry_seconds else 0,
                 "retry_timeout": datetime.timedelta(seconds=retry_seconds),
                 "backoff": {"init_backoff": datetime.timedelta(milliseconds=100),
                             "max_backoff": datetime.timedelta(seconds=2), "base": 2.0}}
        self.store = S3Store(bucket, prefix=prefix or None, config=config, retry_config=retry,  # type: ignore[arg-type]
                             client_options={"allow_http": endpoint.startswith("http://"),
                                             "timeout": timeout, "connect_timeout": timeout})
        self.zarr_store = _ZarrObjects(self.store, explain=self.explain)

    @classmethod
    def from_settings(cls, frames: FrameSettings) -> S3Root:
        return cls(frames.s3_url, endpoint=frames.s3_endpoint, region=frames.s3_region,
                   access_key_id=frames.s3_access_key_id,
                   secret_access_key=frames.s3_secret_access_key.get_secret_value(),
                   retry_seconds=frames.s3_retry_seconds, timeout_seconds=frames.s3_timeout_seconds)

    # ----------------------------------------------------------------------------------- objects

    def get(self, key: str) -> bytes:
        """An object's bytes (:class:`FileNotFoundError` if there is none)."""
        with self.explain.guard(f"reading {key}"):
            return obstore.get(self.store, key).bytes().to_bytes()

    def _has(self, key: str) -> bool:
        with self.explain.guard(f"looking up {key}"):
            try:
                obstore.head(self.store, key)
            except FileNotFoundError:
                return False
            return True

    def _keys(self, prefix: str) -> list[str]:
        with self.explain.guard(f"listing {prefix}"):
            return [meta["path"] for batch in obstore.list(self.store, prefix=prefix) for meta in batch]

    def _delete(self, keys: list[str]) -> None:
        with self.explain.guard("deleting"):
            for i in range(0, len(keys), _DELETE_BATCH):
                obstore.delete(self.store, keys[i:i + _DELETE_BATCH])

    # ----------------------------------------------------------------------------------- streams

    def names(self) -> list[str]:
        with self.explain.guard("listing streams"):
            found = obstore.list_with_delimiter(self.store)
        names = []
        for prefix in found["common_prefixes"]:
            name = prefix.rstrip("/").rsplit("/", 1)[-1]
            try:
                check_stream_name(name)
            except StoreError:
                continue
            if self.exists(name):
                names.append(name)
        return sorted(names)

    def exists(self, name: str) -> bool:
        return self._has(f"{name}/zarr.json") and self._has(f"{name}/frames/zarr.json")

    def place(self, name: str) -> S3Place:
        if not self._has(f"{name}/zarr.json"):
            raise StoreError(f"no stream named {name!r} in {self.describe}")
        return S3Place(self, name)

    def create(self, name: str, build: Callable[[Any], None]) -> S3Place:
        """Build the stream's group in memory, put its arrays, then its ``zarr.json`` (only if none exists)."""
        if self._has(f"{name}/zarr.json"):
            raise StoreError(f"stream {name!r} already exists in {self.describe}")
        leftovers = self._keys(f"{name}/")  # of a create or delete that did not finish
        if leftovers:
            self._delete(leftovers)
        objects: dict[str, Buffer] = {}
        build(MemoryStore(objects))  # type: ignore[arg-type]
        group_meta = objects.pop("zarr.json")
        with self.explain.guard(f"creating stream {name!r}"):
            for key, value in objects.items():
                obstore.put(self.store, f"{name}/{key}", value.to_bytes())
            try:
                obstore.put(self.store, f"{name}/zarr.json", group_meta.to_bytes(), mode="create")
            except obstore.exceptions.AlreadyExistsError:
                raise StoreError(f"stream {name!r} already exists in {self.describe}") from None
        return S3Place(self, name)

    def clear(self) -> int:
        """Delete every object under this root (no stream survives it); returns how many there were."""
        keys = self._keys("")
        self._delete(keys)
        return len(keys)

    def delete(self, name: str) -> bool:
        """The group's ``zarr.json`` first (the stream is gone for everyone), then the rest of its objects."""
        if not self._has(f"{name}/zarr.json"):
            return False
        self._delete([f"{name}/zarr.json"])
        self._delete(self._keys(f"{name}/"))
        return True
