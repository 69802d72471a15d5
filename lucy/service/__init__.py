"""``lucy serve``: the long-running service — several streams ingesting at once, questions over HTTP, an
OpenAI-compatible chat endpoint and MQTT, Prometheus metrics and a live dashboard.

Layout: :mod:`streams` (the stream manager and its persisted list, :mod:`registry`), :mod:`questions` (the query
engine run off the event loop), :mod:`app` (FastAPI) with :mod:`chat` (OpenAI-compatible) and :mod:`auth`,
:mod:`mqtt` (the bridge), :mod:`events` (in-process fan-out of new memory and status), :mod:`server` (uvicorn).
"""
