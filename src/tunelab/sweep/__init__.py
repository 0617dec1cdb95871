"""A sweep's definition: its file validated and expanded into points (``spec``), read and
checked against the schema (``loading``), what an engine and this host allow of it
(``checks``), validation's lines (``messages``), the timed workloads (``workloads``), what a
claim may say (``claimspec``) and the findings file (``findings``)."""
