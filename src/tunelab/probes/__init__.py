"""The disk and network halves of IBM's HADR procedure, measured: ``tunelab probe disk DIR``
(synchronous 1-page and 1000-page writes, as IBM's simulator's ``-write`` test) and
``tunelab probe network`` (round trip and send rate against the socket buffer size, over
the path the lab's standby uses). Both print the calculator's own options (``--disk RATE
OVERHEAD``, ``--network RATE RTT``), in its units: MB of 2^20 bytes, seconds."""
