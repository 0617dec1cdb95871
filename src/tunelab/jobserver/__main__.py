"""``python -m tunelab.jobserver``: the run's job server (tunelab.jobserver.server)."""

import sys

from tunelab.jobserver import server

sys.exit(server.main())
