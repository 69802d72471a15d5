"""The ``lucy`` command line (typer, with rich): one module per command, :mod:`lucy.cli.app` puts them together.

Importing it loads typer, click and the names of :mod:`lucy.config`, not the backends: ``lucy --help`` and
``lucy --version`` stay fast, and each command imports what it runs.
"""

from lucy.cli.app import app, main

__all__ = ["app", "main"]
