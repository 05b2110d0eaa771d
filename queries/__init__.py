"""tracegraph.queries."""
