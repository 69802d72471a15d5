"""Errors that reach users as one clear line (the CLI prints them without a traceback)."""


class LucyError(Exception):
    """A failure caused by input or environment, with a message meant for the user."""


class SourceError(LucyError):
    """A source cannot be opened or read (missing file, not a video, unreachable stream...)."""


class StoreError(LucyError):
    """The data directory cannot hold what was asked (bad stream name, conflicting source...)."""
