"""Judging rows: statistics, decisions, sequential looks, the CPU-speed correction and the
findings' verdicts. Pure functions over rows, below both the measuring code (which asks
whether it may stop) and the reports (which show stored verdicts)."""
