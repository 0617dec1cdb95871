"""The report's kernel manager in a run with a job server (named by ``tunelab.host.jobs``, which
``tunelab.report.render`` takes it from): its ``python -m ipykernel_launcher`` becomes
``python -m tunelab.jobserver.kernel``, so the kernel is forked warm. Apart from the launcher
(``kernel``), which must not import jupyter_client: every warm kernel starts there.
"""

from __future__ import annotations

from tunelab.report.render import ReportKernelManager

LAUNCHER = "tunelab.jobserver.kernel"


class WarmKernelManager(ReportKernelManager):
    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if cmd[1:3] == ["-m", "ipykernel_launcher"]:
            cmd[2] = LAUNCHER
        return cmd
