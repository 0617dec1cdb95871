"""tunelab: a reproducible lab harness for database-tuning experiments."""

__version__ = "0.1.0"
