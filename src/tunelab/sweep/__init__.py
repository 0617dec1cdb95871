"""A sweep's definition: its file validated and expanded into points (``spec``), the
timed workloads (``workloads``), what a claim may say (``claimspec``) and the findings file
(``findings``)."""
