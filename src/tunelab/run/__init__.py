"""A run's plumbing around Snakemake: its start (``labstart``, ``snakemake_cli``), what
the Snakefile sets up (``workflow``), the workflow's helpers (``pipeline``), cluster nodes,
progress lines, recovery after a kill, ``tunelab check`` and ``./lab report``
(``report_all``)."""
