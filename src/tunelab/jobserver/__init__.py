"""The run's warm job server: one process that starts the workflow's `tunelab` jobs by
forking, so a point does not pay the interpreter's start and its imports (pandas, numpy,
the engine drivers: about 0.6 s, a third of a short point's wall time) before its
measurement.

The workflow starts it when a local run begins (``control``, called from the Snakefile) and
names its socket in ``$TUNELAB_JOB_SERVER``. A job's `tunelab` command (``client``: the
console script ``entry``) sends itself to the server over that socket; the server
(``server``) forks, the child runs the command and its exit status goes back to the job,
which exits with it. Signals the job gets (Snakemake stopping it, Ctrl-C) are passed on to
the child. A report's notebook kernel is forked warm the same way (``kernel``). Where there
is no server, or it cannot be reached, the command runs in its own process as before.

A layer above the rest of the package, which imports none of it: the names it is known by
are in ``tunelab.host.jobs``. Importing this package loads the job's side alone (C modules only):
every `tunelab` command does.
"""

from tunelab.jobserver.client import entry

__all__ = ["entry"]
