"""Memory: time-indexed text nodes (SQLite + FTS5, or PostgreSQL on a cluster: :func:`lucy.wiring.open_memory` picks),
the captioners that write them, and the coarse builder."""
