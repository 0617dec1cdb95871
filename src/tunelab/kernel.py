"""The kernel a report's notebook runs in, started warm where the run has a job server: the
server forks it with IPython, pandas, seaborn and the report's modules already imported
(``tunelab.jobserver``), instead of a new interpreter importing them for every report.
Elsewhere it is ipykernel's own launcher, run in its place. ``tunelab.report.render`` starts
it as jupyter_client would start ``python -m ipykernel_launcher -f CONNECTION_FILE``.
"""

from __future__ import annotations

import os
import sys

from tunelab import jobserver


def main() -> int:
    argv = sys.argv[1:]
    code = jobserver.submit([jobserver.KERNEL, *argv])
    if code is None:
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    return code


if __name__ == "__main__":
    sys.exit(main())
