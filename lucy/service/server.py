"""Running the service: the bind check, logging that never shows credentials, and uvicorn."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator

from lucy.config import LucySettings
from lucy.config.settings import is_loopback_host
from lucy.errors import LucyError
from lucy.ingest.lock import Holder, serve_lock
from lucy.redaction import RedactingFilter, redacting_handler
from lucy.runtime.protocol import RuntimeFactory
from lucy.runtime.registry import StreamRegistry
from lucy.wiring.runtime import local_runtime


def check_bind(settings: LucySettings) -> None:
    """Refuse to listen beyond this machine without an API token (the config refuses it too; this guards
    settings changed after loading)."""
    s = settings.service
    if not is_loopback_host(s.host) and s.api_token is None:
        raise LucyError(f"refusing to serve on {s.host}: an address other than loopback needs an API token "
                        f"(service.api_token / LUCY_SERVICE__API_TOKEN)")


def _logging() -> None:
    """Every handler redacts stream credentials; uvicorn's loggers go through the same handler."""
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    if not root.handlers:
        root.addHandler(redacting_handler())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that a stop asked for by SIGTERM / SIGINT exits with status 0 once the
        shutdown is done (uvicorn re-raises the signal, so a clean stop would look like death by signal)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server


def serve(settings: LucySettings, runtime: RuntimeFactory = local_runtime) -> int:
    """Serve until SIGINT / SIGTERM, with the stream runtime ``runtime`` (chosen by ``lucy serve``); streams stop
    cleanly and resume at the next start."""
    import uvicorn

    from lucy.service.app import create_app

    check_bind(settings)
    # One server per data directory: a second one would resume the same streams (two writers each).
    with serve_lock(settings.data, Holder.this_process("lucy serve")):
        StreamRegistry(settings.data).load()  # a damaged stream list stops the start with one clear line
        _logging()
        s = settings.service
        app = create_app(settings, runtime=runtime)
        config = uvicorn.Config(app, host=s.host, port=s.port, log_config=None, access_log=False,
                                timeout_graceful_shutdown=30, lifespan="on")
        server = _server_class()(config)
        from lucy.allocator import in_use

        print(f"lucy: serving {settings.data} on http://{s.host}:{s.port} (dashboard at /, API docs at /docs; "
              f"allocator {in_use()})", file=sys.stderr, flush=True)
        server.run()
    return 0 if server.started else 1
