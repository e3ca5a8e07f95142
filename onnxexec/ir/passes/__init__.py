"""Graph-to-graph rewrites, one per module."""
