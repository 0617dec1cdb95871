"""A sweep's page: its sections in the order the template (``reports/sweep_report.py``) shows
them (header, findings, what was measured, figures, times, I/O, the optional sections,
callouts, the appendix, log shipping), and the figures only that page draws."""
