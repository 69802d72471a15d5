"""The composition root: the one place that reads backend names from config and opens stores.

Entry points (``lucy serve``, a stream worker, each CLI command, the demo, eval) call these once per process and
hand what they opened down; nothing below reads ``frames.backend`` or ``memory.backend`` or opens a store of its own.
"""

from lucy.wiring.stores import open_existing_memory, open_frames, open_memory, open_worker_stores

__all__ = ["open_existing_memory", "open_frames", "open_memory", "open_worker_stores"]
