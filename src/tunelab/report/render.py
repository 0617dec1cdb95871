"""Execute a text-notebook template with parameters and write self-contained HTML.

jupytext reads the percent-format template; the parameters go into a cell tagged
``injected-parameters`` right after the cell tagged ``parameters`` (the papermill
convention, so the template stays runnable on its own); nbclient executes it in a
``python3`` kernel (jupyter_client runs a kernel spec whose command is ``python`` with the
current interpreter; in a run with a job server, a kernel the server forks warm);
nbconvert writes HTML with every input and prompt left out. The page
loads nothing from the network: the script tags for require.js, MathJax and Mermaid are
dropped and figures are data URIs.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
import shutil
import tempfile
import time
from pathlib import Path
from queue import Empty
from typing import Any

import jupytext
import nbformat
from jinja2 import DictLoader
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbconvert import HTMLExporter
from traitlets import DottedObjectName, Type, default

from tunelab.host import atomic, jobs

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
DEFAULT_TIMEOUT_S = 300
KERNEL_FOLDER = "tunelab-kernel-"  # then the pid of the report that made it

CSS = """
body.jp-Notebook { background: #f4f5f7; }
body.jp-Notebook main {
  max-width: 1180px; margin: 24px auto 64px; padding: 28px 44px 56px; background: #fff;
  border-radius: 10px; box-shadow: 0 1px 3px rgba(0,0,0,.07), 0 6px 24px rgba(0,0,0,.04);
}
.jp-RenderedHTMLCommon, body.jp-Notebook {
  font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial,
    sans-serif;
  color: #1f2328; font-size: 15px; line-height: 1.5;
}
.jp-Cell { padding: 0 !important; }
.jp-OutputArea-output, .jp-RenderedHTMLCommon { padding-left: 0 !important;
  padding-right: 0 !important; }
.jp-RenderedHTMLCommon h1 { font-size: 1.9rem; margin: 0 0 .2rem; }
.jp-RenderedHTMLCommon h2 {
  font-size: 1.35rem; margin-top: 2.2rem; padding-bottom: .3rem; border-bottom: 1px solid #e4e6ea;
}
.jp-RenderedHTMLCommon h3 { font-size: 1.08rem; margin-top: 1.6rem; color: #33373d; }
.tl-facts { color: #57606a; margin: 0 0 .6rem; }
.tl-lead { font-size: 1.02rem; color: #33373d; max-width: 60rem; }
.tl-methods { color: #33373d; max-width: 60rem; margin: 0 0 .7rem; }
.tl-note, .tl-warn {
  padding: 8px 14px; margin: 10px 0 14px; border-radius: 4px; font-size: 13.5px; max-width: 70rem;
}
.tl-note { background: #f1f5fb; border-left: 4px solid #4a78b4; }
.tl-warn { background: #fff7e0; border-left: 4px solid #d99a00; }
.tl-verdict { display: inline-block; font-size: 12px; font-weight: 600; padding: 0 7px;
  border-radius: 9px; margin-right: 6px; white-space: nowrap; }
.tl-reproduced, .tl-holds { background: #dafbe1; color: #116329; }
.tl-not-reproduced, .tl-does-not-hold { background: #ffebe9; color: #a40e26; }
.tl-undecided { background: #fff8c5; color: #7d4e00; }
.tl-cannot-run { background: #eaeef2; color: #424a53; }
.tl-explains { color: #57606a; font-size: 12.5px; padding-left: 12px; display: block; }
ul.tl-claims li { margin: 4px 0; } ul.tl-claims .tl-evidence { color: #57606a; font-size: 13px; }
figure.tl-figure { margin: 10px 0 26px; }
figure.tl-figure img { max-width: 100%; height: auto; display: block; }
figure.tl-figure figcaption {
  font-size: 12.5px; color: #57606a; margin-top: 4px; max-width: 70rem;
}
.jp-RenderedHTMLCommon table.tl-table {
  font-size: 12.5px; font-variant-numeric: tabular-nums; margin: 6px 0 18px; border: none;
}
.jp-RenderedHTMLCommon table.tl-table th { background: #f6f8fa; }
.jp-RenderedHTMLCommon table.tl-table td, .jp-RenderedHTMLCommon table.tl-table th {
  padding: 4px 8px; border-bottom: 1px solid #eceef1;
}
.jp-RenderedHTMLCommon table.tl-table td { white-space: nowrap; }
.jp-RenderedHTMLCommon table.tl-kv th {
  text-align: left; vertical-align: top; width: 13rem; color: #444c56;
}
.jp-RenderedHTMLCommon table.tl-kv td { text-align: left; white-space: normal; }
.jp-RenderedHTMLCommon table.tl-kv table.tl-table { margin: 0; }
.tl-wrap { display: block; white-space: normal; max-width: 11rem; text-align: left;
  overflow-wrap: anywhere; }  /* a long index name breaks, never runs into the next cell */
.tl-wide { overflow-x: auto; }
.tl-scroll { overflow: auto; max-height: 520px; border: 1px solid #eceef1; border-radius: 4px; }
.jp-RenderedHTMLCommon table.tl-raw td { font-family: monospace; font-size: 11px;
  white-space: nowrap; }
details.tl-raw-rows summary { cursor: pointer; color: #0b5cad; margin: 6px 0; }
.jp-RenderedHTMLCommon code { font-size: 12px; background: #f3f4f6; padding: 1px 4px;
  border-radius: 3px; }
"""

TEMPLATE = (
    "{%- extends 'index.html.j2' -%}\n"
    "{% block html_head_js_requirejs %}{% endblock html_head_js_requirejs %}\n"
    "{% block html_head_js_mathjax %}{% endblock html_head_js_mathjax %}\n"
    "{% block html_head_js_mermaidjs %}{% endblock html_head_js_mermaidjs %}\n"
    # JupyterLab's own style sheets (some 260 KB a page) style cells this page never shows:
    # its output areas are plain blocks here, styled by CSS above alone.
    "{% block notebook_css %}{% endblock notebook_css %}\n"
    "{% block html_head_css %}<style>" + CSS + "</style>{% endblock html_head_css %}\n"
)


class RenderError(RuntimeError):
    """The template could not be rendered; the message is one line."""


def template_parameters(nb: nbformat.NotebookNode) -> tuple[int, list[str]]:
    """Index of the cell tagged ``parameters`` and the names it assigns."""
    for i, cell in enumerate(nb.cells):
        if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", []):
            names = []
            for node in ast.parse(cell.source).body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, ast.AnnAssign):
                    targets = [node.target]
                names += [t.id for t in targets if isinstance(t, ast.Name)]
            return i, names
    raise RenderError(f"no cell tagged '{PARAMETERS_TAG}' in the template")


def inject_parameters(nb: nbformat.NotebookNode, params: dict[str, Any]) -> nbformat.NotebookNode:
    """Add an ``injected-parameters`` cell after the parameters cell (replacing an old one)."""
    index, names = template_parameters(nb)
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise RenderError(
            f"unknown parameter(s) {', '.join(unknown)}; the template has: {', '.join(names)}"
        )
    nb.cells = [c for c in nb.cells if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]
    source = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [INJECTED_TAG]})
    nb.cells.insert(index + 1, cell)
    for i, c in enumerate(nb.cells):  # ids end up in the HTML: make them stable, not random
        c["id"] = f"cell-{i}"
    return nb


@functools.cache  # its templates compiled once (0.14 s), before the job server forks
def exporter() -> HTMLExporter:
    return HTMLExporter(
        template_name="lab",
        theme="light",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        extra_loaders=[DictLoader({"tunelab.html.j2": TEMPLATE})],
        template_file="tunelab.html.j2",
    )


def warm_exporter() -> None:
    """Compile the page's templates now (the job server's preload): every report reuses them."""
    exporter().from_notebook_node(nbformat.v4.new_notebook())


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_orphan_kernel_folders(base: Path) -> list[Path]:
    """Remove the socket folders of reports killed before their kernel shut down (kill -9):
    each folder names the process that made it, and that process is gone."""
    removed = []
    for folder in base.glob(f"{KERNEL_FOLDER}*-*"):
        pid = folder.name[len(KERNEL_FOLDER) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


class PromptKernelClient(AsyncKernelClient):
    """jupyter_client's client, ready as soon as the kernel answers: its own readiness check
    ends by waiting for IOPub to fall silent for 0.2 s, a fifth of a warm kernel's start.
    Nothing needs that wait here: nbclient takes a cell's outputs by their parent message, so
    what the kernel publishes at its start never lands in a cell."""

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                pass
            else:
                if msg["msg_type"] == "kernel_info_reply":
                    try:  # IOPub connected (the kernel greets each subscriber)? Else again.
                        await self.iopub_channel.get_msg(timeout=0.2)
                    except Empty:
                        pass
                    else:
                        self._handle_kernel_info_reply(msg)
                        return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    wait_for_ready = _async_wait_for_ready


class ReportKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, with the report's kernel client; in a run with a job
    server, the one ``tunelab.host.jobs.WARM_KERNEL_MANAGER`` names starts the kernel warm."""

    client_class = DottedObjectName("tunelab.report.render.PromptKernelClient")
    client_factory = Type(PromptKernelClient, klass=AsyncKernelClient)

    # Unix sockets in a folder of the kernel's own, not TCP ports: a port jupyter_client found
    # free can be taken before the kernel binds it (by another report's kernel, or any
    # loopback connection's own port), and the kernel then dies as it starts.
    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("ip")
    def _ip_default(self) -> str:
        # A socket's path has at most 107 bytes: a short folder even where TMPDIR is long.
        base = tempfile.gettempdir()
        base = base if len(base) < 48 else "/tmp"
        remove_orphan_kernel_folders(Path(base))
        folder = tempfile.mkdtemp(prefix=f"{KERNEL_FOLDER}{os.getpid()}-", dir=base)
        return os.path.join(folder, "k")

    def cleanup_ipc_files(self) -> None:
        super().cleanup_ipc_files()
        with contextlib.suppress(OSError):  # not empty or gone: not ours to force
            os.rmdir(os.path.dirname(self.ip))

    async def _async_finish_shutdown(
        self, waittime: float | None = None, pollinterval: float = 0.1, restart: bool = False
    ) -> None:
        # jupyter_client looks for the kernel's exit every 0.1 s; a warm kernel exits some
        # 30 ms after its shutdown reply, so the report would wait out most of a period.
        await super()._async_finish_shutdown(waittime, min(pollinterval, 0.01), restart)


def execute(
    template: Path,
    params: dict[str, Any],
    timeout: int = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
) -> nbformat.NotebookNode:
    template = Path(template)
    if not template.is_file():
        raise RenderError(f"{template}: template not found")
    nb = jupytext.read(template)
    nb = inject_parameters(nb, params)
    nb.metadata["title"] = str(params.get("title") or params.get("sweep_name") or template.stem)
    # With a job server, its kernel manager (by name: the server is a layer above this one).
    warm = os.environ.get(jobs.JOB_SERVER_ENV)
    manager = jobs.WARM_KERNEL_MANAGER if warm else ReportKernelManager
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        kernel_manager_class=manager,
        resources={"metadata": {"path": str(cwd or Path.cwd())}},
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        raise RenderError(f"{template}: {exc.ename}: {_one_line(exc.evalue)}") from None
    except CellTimeoutError:
        raise RenderError(f"{template}: a cell ran longer than {timeout} s") from None
    except DeadKernelError as exc:
        raise RenderError(f"{template}: the kernel died ({_one_line(exc)})") from None
    return nb


def render(
    template: Path,
    params: dict[str, Any],
    out_html: Path,
    timeout: int = DEFAULT_TIMEOUT_S,
) -> Path:
    """Execute ``template`` with ``params`` and write the HTML page to ``out_html``."""
    nb = execute(template, params, timeout=timeout)
    body, _ = exporter().from_notebook_node(nb)
    return atomic.write_text(out_html, body)


def timed_render(template: Path, params: dict[str, Any], out_html: Path) -> tuple[Path, float]:
    """``render`` and the wall-clock seconds it took (for benchmarks and logs)."""
    start = time.perf_counter()
    path = render(template, params, out_html)
    return path, time.perf_counter() - start
