"""Questions: the VideoLucy backtracking loop over ingested memory, its agents (reasoners) and its trace."""

from lucy.query.engine import QueryConfig, QueryEngine, QueryRun
from lucy.query.trace import Evidence, QueryResult, TraceStep

__all__ = ["Evidence", "QueryConfig", "QueryEngine", "QueryResult", "QueryRun", "TraceStep"]
