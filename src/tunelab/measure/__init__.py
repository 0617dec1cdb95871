"""Measuring: one point, its repetitions and its row (``runner``), and a sweep's points
in rounds with the stop rule (``sweeprun``)."""
