"""Test helpers that tests, benchmarks and demos share (real servers with scripted behaviour)."""

import os

# The suite's own defaults, for the tests' processes and every `lucy` child they start: no detect stage (NanoDet costs
# ~60 ms a frame, and most tests are about something else). The tests of detection, objects and the memory written from
# them turn it on, as users have it by default.
SUITE_ENV = {"LUCY_DETECT__BACKEND": "none"}


def child_env() -> dict[str, str]:
    """The environment of a child process started by a test: none of the developer's ``LUCY_*`` variables, the suite's
    defaults (:data:`SUITE_ENV`)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}, **SUITE_ENV}
