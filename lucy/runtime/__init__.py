"""The stream runtime: the streams a server records, each supervised from the moment it is asked for until its run
ends, behind one interface (:class:`lucy.runtime.protocol.StreamRuntime`) that the service, MQTT and the dashboard
alone know.

Layout: :mod:`protocol` (the interface), :mod:`streams` (the local implementation: one worker process per stream,
restarted with backoff), :mod:`worker` (the worker process and the run inside it), :mod:`messages` (the typed
reports on a worker's pipe), :mod:`registry` (the persisted list of streams), :mod:`status` (a stream's status, the
one JSON view of its progress), :mod:`events` (in-process fan-out of new memory and status). The cluster's
implementation (:mod:`lucy.cluster.manager`) builds on these; nothing here knows the service or the cluster.
"""
