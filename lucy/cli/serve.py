"""``lucy serve`` (the HTTP API, MQTT bridge, metrics and dashboard) and ``lucy demo``."""

from __future__ import annotations

from typing import Annotated

import typer

from lucy.cli.common import ConfigOption, DataOption, PresetOption, VerboseOption, load


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
    from lucy.service.server import serve as run_server

    return run_server(settings)


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
