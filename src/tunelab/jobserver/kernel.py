"""The kernel a report's notebook runs in, started warm where the run has a job server: the
server forks it with IPython, pandas, seaborn and the report's modules already imported,
instead of a new interpreter importing them for every report. Elsewhere it is ipykernel's
own launcher, run in its place. ``kernel_manager.WarmKernelManager`` starts it as
jupyter_client would start ``python -m ipykernel_launcher -f CONNECTION_FILE``.

Imports the job's side alone: a report's every kernel starts here.
"""

from __future__ import annotations

import os
import sys

from tunelab.host import jobs
from tunelab.jobserver import client


def main() -> int:
    argv = sys.argv[1:]
    code = client.submit([jobs.KERNEL, *argv])
    if code is None:
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    return code


if __name__ == "__main__":
    sys.exit(main())
