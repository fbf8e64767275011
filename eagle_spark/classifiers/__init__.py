"""Distributed XMC classifiers: per-label linear solvers inside Spark tasks, one-vs-all, label tree."""
