"""The run comparison, `tunelab compare OLD NEW`: what changed between two runs of the same
sweeps. ``match`` pairs the two runs' points, ``changes`` judges them (the noise model is
``analysis.change``), ``history`` keeps the host's A/A comparisons, ``table`` and ``text``
print them, ``page`` is the HTML page, ``files`` the files it writes, ``confirm`` measures
the alarms again, ``command`` is the command. The names callers use are here."""

from tunelab.report.compare.changes import (
    BETTER,
    BH,
    DEFAULT_LEVEL,
    DEFAULT_MIN_EFFECT,
    HOLM,
    NOISY,
    NOT_REPEATED,
    RANK,
    SAME,
    TOO_FEW,
    TOO_SHORT,
    WORSE,
    Comparison,
    MetricChange,
    compare,
    compare_frames,
    read_history,
    record,
)
from tunelab.report.compare.command import compare_main
from tunelab.report.compare.match import CompareInputError
from tunelab.report.compare.table import text_lines
from tunelab.report.compare.text import change_line, main_shifts, shift_line, summary_line
from tunelab.report.results_dir import ResultsDirError, load_side, result_files

__all__ = [
    "BETTER", "BH", "DEFAULT_LEVEL", "DEFAULT_MIN_EFFECT", "HOLM", "NOISY", "NOT_REPEATED",
    "RANK", "SAME", "TOO_FEW", "TOO_SHORT", "WORSE", "CompareInputError", "Comparison",
    "MetricChange", "ResultsDirError", "change_line", "compare", "compare_frames",
    "compare_main", "load_side", "main_shifts", "read_history", "record", "result_files",
    "shift_line", "summary_line", "text_lines",
]  # fmt: skip
