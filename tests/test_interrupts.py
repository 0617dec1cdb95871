"""A stop while a command starts (Python still importing): Snakemake as `./lab run` starts it
(tunelab.snakemake_cli) and the `tunelab` command end with 130 and no traceback; the wrapper
is Snakemake's own command line, and `tunelab recover` knows it as Snakemake."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunelab import recovery
from tunelab.ownership import Proc

WRAPPER = [sys.executable, "-m", "tunelab.snakemake_cli"]


def test_it_is_snakemakes_command_line():
    plain = subprocess.run([Path(sys.executable).parent / "snakemake", "--version"],
                           capture_output=True, text=True)  # fmt: skip
    done = subprocess.run([*WRAPPER, "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == plain.stdout != "", done.stderr
    bad = subprocess.run([*WRAPPER, "--no-such-option"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.splitlines()[-1].startswith("snakemake: error")


COMMANDS = {
    "snakemake": [*WRAPPER, "--version"],
    "tunelab": [str(Path(sys.executable).parent / "tunelab"), "engines"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_stop_while_it_starts_ends_it_with_130_and_no_traceback(command):
    """SIGINT at moments over the command's start, while it imports its modules (plain
    `snakemake`, and `tunelab` before, printed a traceback of some sixty lines then). Not
    covered: the interpreter's own first ~50 ms, before any code of the lab's runs."""
    hit = 0
    for delay in (0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7):
        proc = subprocess.Popen(COMMANDS[command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # it had finished
            continue
        hit += 1
        # -SIGINT: it came as the interpreter ended, after Python had put back the default
        assert proc.returncode in (130, -signal.SIGINT), (delay, out, err)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
    assert hit, "every start finished before its stop"


def test_recover_knows_it_as_snakemake(tmp_path):
    started = Proc(1, (sys.executable, "-m", "tunelab.snakemake_cli", "--profile", "p"), tmp_path)
    assert recovery.is_snakemake(started)
    assert recovery.lock_holders(tmp_path, [started]) == [started]
    other = Proc(2, (sys.executable, "-m", "tunelab.cli", "--profile", "p"), tmp_path)
    assert not recovery.is_snakemake(other)
    assert recovery.lock_holders(tmp_path, [other]) == []
