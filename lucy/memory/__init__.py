"""Memory: time-indexed text nodes (SQLite + FTS5), the captioners that write them, and the coarse builder."""
