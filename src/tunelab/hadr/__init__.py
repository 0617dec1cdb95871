"""The HADR calculator: IBM's log-shipping model (``model``), its workload input
(``scan``) and its report (``report``); ``tunelab hadr-calc`` is its command (docs/hadr.md)."""
