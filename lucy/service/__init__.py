"""``lucy serve``: the long-running service — several streams ingesting at once, questions over HTTP, an
OpenAI-compatible chat endpoint and MQTT, Prometheus metrics and a live dashboard.

The streams themselves are supervised by the stream runtime (:mod:`lucy.runtime`), which the service knows only as
its protocol, handed in by ``lucy serve``. Layout: :mod:`questions` (the query engine run off the event loop),
:mod:`app` (FastAPI: it only assembles) with :mod:`state` (the shared service on ``app.state.svc``, its startup and
shutdown), :mod:`routes` (one router per resource) and the logic they call (:mod:`chat` for the OpenAI-compatible
chat, :mod:`memory_pages` for memory and frames, :mod:`live_feed` for the dashboard's live figures), :mod:`errors`
and :mod:`http_errors` (the only place errors become HTTP statuses), :mod:`auth` and :mod:`guards`, :mod:`mqtt`
(the bridge), :mod:`server` (uvicorn).
"""
