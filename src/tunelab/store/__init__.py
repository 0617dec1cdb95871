"""What the lab keeps on disk: the seeded data sets (``dataset``) and the result rows with
their checks (``results``)."""
