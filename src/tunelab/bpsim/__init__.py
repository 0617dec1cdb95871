"""Buffer-pool simulation from page-reference traces.

- ``stackdist``: exact LRU stack distances in one pass (numba kernels);
- ``curves``: hits, misses, reads/s, application and system hit ratio, knee, working set;
- ``policies``: CLOCK and LRU with a sequential threshold (DB2's VPSEQT) at chosen sizes;
- ``shards``: spatially sampled curves with a per-size standard error;
- ``members``: shared-data pools as in DB2 pureScale, a local pool per member and a group pool;
- ``analytic``: the same pools' hit ratios by formula (Che's approximation, with invalidation);
- ``traces``/``generators``: trace files and synthetic workloads;
- ``compare``: predicted against measured physical reads;
- ``cli``: ``tunelab bpsim TRACE``.
"""

from tunelab.bpsim.curves import curve_from_histograms, knee, lru_curve, working_set_pages
from tunelab.bpsim.stackdist import distance_histograms, stack_distances
from tunelab.bpsim.traces import Trace, read_trace, write_trace

__all__ = [
    "Trace",
    "curve_from_histograms",
    "distance_histograms",
    "knee",
    "lru_curve",
    "read_trace",
    "stack_distances",
    "working_set_pages",
    "write_trace",
]
