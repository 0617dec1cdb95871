"""Snakemake's command line as `./lab run` starts it (``python -m tunelab.run.snakemake_cli``).

A stop (Ctrl-C, or the lab's SIGTERM passed on as SIGINT) reaches Snakemake as SIGINT. Once
its scheduler runs, Snakemake takes it: it cancels its jobs and removes their incomplete
outputs. Before that, while it imports its modules or builds its graph of jobs (a second or
more), nothing catches the KeyboardInterrupt, and Python prints a traceback of some sixty
lines under the lab's one-line stop. Here it ends with 130 and no traceback: no job had
started, so there is nothing to cancel.

A SIGTERM to the whole group (a CI runner's cancel) reaches Snakemake itself, whose handler
(``JobScheduler.exit_gracefully``) takes the scheduler's lock, a ``threading.Lock``. A signal
handler runs on the main thread, and when that thread holds the lock (finishing a job that
failed, as one does that the same SIGTERM stopped) the run waits on itself for good. The
handler here sets the same flag without the lock (``_graceful_exit``).
"""

from __future__ import annotations

import sys

from tunelab.host.interrupts import EXIT_INTERRUPTED, interrupted


def _graceful_exit(self, *_args) -> None:
    # A plain attribute store: the scheduler reads it under its lock on its next pass.
    self._user_kill = "graceful"
    self._open_jobs.release()


def patch_scheduler() -> None:
    """Snakemake's SIGTERM handler made ``_graceful_exit``, before a scheduler binds it."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    JobScheduler.exit_gracefully = _graceful_exit


def main() -> int:
    try:
        from snakemake.cli import main as snakemake_main

        patch_scheduler()
        sys.argv[0] = "snakemake"  # its messages name the program as a user typed it
        snakemake_main()
    except SystemExit:
        raise
    except BaseException as exc:
        if interrupted(exc):
            return EXIT_INTERRUPTED
        raise
    return 0  # Snakemake's main ends with sys.exit()


if __name__ == "__main__":
    sys.exit(main())
