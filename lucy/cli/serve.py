"""``lucy serve`` (the HTTP API, MQTT bridge, metrics and dashboard) and ``lucy demo``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lucy.cli.common import ConfigOption, DataOption, PresetOption, VerboseOption, load

if TYPE_CHECKING:  # the runtime is imported only when a server starts: `lucy --help` stays quick
    from lucy.config import LucySettings
    from lucy.runtime.protocol import RuntimeFactory


def serve(host: Annotated[str | None, typer.Option(
              show_default=False, help="Address to bind (default 127.0.0.1; others need service.api_token).")] = None,
          port: Annotated[int | None, typer.Option(show_default=False, help="TCP port (default 8321).")] = None,
          cluster: Annotated[str | None, typer.Option(
              show_default=False, metavar="ADDRESS",
              help="Serve as one replica of a Ray cluster (its head's address, or auto): streams are recorded by "
                   "owners on the cluster's ingest nodes; memory is in PostgreSQL and frames in S3.")] = None,
          data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
          verbose: VerboseOption = 0) -> int:
    """Serve the HTTP API, MQTT bridge, metrics and dashboard."""
    settings = load(data, config, preset, verbose,
                    **{"service.host": host, "service.port": port, "cluster.address": cluster})
    from lucy.allocator import choose

    choose(settings.service.allocator)  # before any thread: may re-execute this command on jemalloc
    from lucy.service.server import check_bind
    from lucy.service.server import serve as run_server

    check_bind(settings)
    return run_server(settings, runtime=stream_runtime(settings))


def stream_runtime(settings: LucySettings) -> RuntimeFactory:
    """The stream runtime the settings ask for: Ray owners on a cluster (joined here, first: a wrong address is one
    clear line, not a failed start), else worker processes on this machine. The service sees only the protocol."""
    if settings.cluster.enabled:
        from lucy.cluster.manager import ClusterStreamManager, connect  # ray is only needed on a cluster

        connect(settings)
        return ClusterStreamManager
    from lucy.wiring.runtime import local_runtime

    return local_runtime


def demo(fast: Annotated[bool, typer.Option("--fast", help="Ingest as fast as possible instead of in real time.")]
         = False,
         data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
         verbose: VerboseOption = 0) -> int:
    """Generate a sample video, ingest it as stream 'demo' (replacing an earlier one) and ask questions about it
    while it is ingested."""
    settings = load(data, config, preset, verbose)
    from lucy.demo import run_demo

    given = [("--data", data), ("--config", config)]
    return run_demo(settings, flags=[part for flag, value in given if value is not None for part in (flag, str(value))],
                    realtime=not fast)
