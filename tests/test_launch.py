"""The tests pass however they are launched: from a terminal, or from a background job, nohup
or cron, which start them with SIGINT ignored."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from conftest import REPO

_PROBE = textwrap.dedent(
    """
    import subprocess, sys

    def test_child_gets_sigint_default():
        out = subprocess.run(
            [sys.executable, "-c",
             "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"],
            capture_output=True, text=True, check=True,
        ).stdout
        assert out.strip() == "False", "the child ignores SIGINT"
    """
)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_children_of_tests_started_with_sigint_ignored_get_the_default(tmp_path):
    (tmp_path / "test_probe.py").write_text(_PROBE)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "conftest",
            "--rootdir",
            str(tmp_path),
            "-c",
            str(REPO / "pyproject.toml"),
            str(tmp_path / "test_probe.py"),
        ],
        capture_output=True,
        text=True,
        preexec_fn=_ignore_sigint,
        cwd=REPO / "tests",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
