"""tracegraph.examples."""
