"""tracegraph.explorer."""
