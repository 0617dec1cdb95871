"""Measuring: one point and its repetitions (``runner``), a repetition's row by groups of
columns (``columns``), and a sweep's points in rounds with the stop rule (``sweeprun``)."""
