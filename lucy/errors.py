"""Errors that reach users as one clear line (the CLI prints them without a traceback)."""


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
