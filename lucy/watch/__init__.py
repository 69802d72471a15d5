"""Watches: standing questions on a stream, checked as each coarse span closes, and the alerts they raise.

The records (:class:`~lucy.memory.watches.Watch`, :class:`~lucy.memory.watches.Alert`) live with the memory stores
that persist them; this package checks (:mod:`lucy.watch.checker`) and delivers (:mod:`lucy.watch.delivery`).
"""
