"""``lucy serve``: the long-running service — several streams ingesting at once, questions over HTTP, an
OpenAI-compatible chat endpoint and MQTT, Prometheus metrics and a live dashboard.

Layout: :mod:`streams` (the stream manager and its persisted list, :mod:`registry`), :mod:`questions` (the query
engine run off the event loop), :mod:`app` (FastAPI: it only assembles) with :mod:`state` (the shared service on
``app.state.svc``, its startup and shutdown), :mod:`routes` (one router per resource) and the logic they call
(:mod:`chat` for the OpenAI-compatible chat, :mod:`memory_pages` for memory and frames), :mod:`auth` and
:mod:`guards`, :mod:`mqtt` (the bridge), :mod:`events` (in-process fan-out of new memory and status),
:mod:`server` (uvicorn).
"""
