"""Turn Kineto traces into columnar tables and load them into the graph store."""
