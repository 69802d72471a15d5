"""Memory: time-indexed text nodes (SQLite + FTS5, or PostgreSQL on a cluster: :mod:`lucy.memory.stores` picks),
the captioners that write them, and the coarse builder."""
