"""Engine knowledge stays in ``src/tunelab/engines/``: the rest of the lab (the package, the
Snakefile and its rule files, ``lab``) takes what it needs from the engine contract, so adding
an engine touches only what docs/adding-an-engine.md lists. A name of an engine or its driver
in their code (prose aside: comments and docstrings) fails here unless the allowlist below
says why it belongs. And a run on SQLite never imports another engine's driver, so ``lab``
installs only the run's own engine's."""

from __future__ import annotations

import ast
import fnmatch
import io
import os
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

from tunelab import engines

REPO = Path(__file__).resolve().parents[1]
# Engine names come from the registry; these are the drivers' and the servers' own words.
DRIVER_WORDS = ("apsw", "ibm_db", "psycopg", "mysql", "maria", "innodb", r"\bpg_", "postgres")
NAMES = re.compile("|".join([*map(re.escape, engines.names()), *DRIVER_WORDS]), re.IGNORECASE)

# (file pattern, line pattern, why it may name an engine). Keep it short: a new entry is a
# new place that an added engine would have to be taught about.
ALLOWED = (
    # Device calibration turns fio's figures into the optimizer costs the assignment asks
    # for: DB2's OVERHEAD/TRANSFERRATE (its MB and page sizes) and PostgreSQL's
    # random_page_cost. The figures are the experiment's content, not an engine's plumbing.
    ("src/tunelab/calibrate/*", r".", "calibration results in DB2's and PostgreSQL's units"),
    # `./lab run` without --config engine=X runs the default engine.
    ("lab", r"^\s*local engine=sqlite prev=", "the default engine"),
)


def _python_code(text: str) -> list[str]:
    """The file's lines with comments and docstrings (any bare string statement) blanked."""
    lines = text.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    for node in ast.walk(ast.parse(text)):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for row in range(node.lineno, node.end_lineno + 1):
                lines[row - 1] = ""
    return lines


def _workflow_code(text: str) -> list[str]:
    """Snakemake files and ``lab``: comments and triple-quoted rule docstrings blanked."""
    text = re.sub(r'"""[\s\S]*?"""', lambda m: "\n" * m.group().count("\n"), text)
    return [re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines()]


def _files() -> list[Path]:
    package = REPO / "src" / "tunelab"
    inside = [p for p in package.rglob("*.py") if (package / "engines") not in p.parents]
    return [
        *sorted(inside),
        REPO / "Snakefile",
        *sorted((REPO / "workflows").glob("*.smk")),
        REPO / "lab",
    ]


def _allowed(rel: str, line: str) -> bool:
    return any(
        fnmatch.fnmatch(rel, files) and re.search(pattern, line) for files, pattern, _ in ALLOWED
    )


def test_no_engine_is_named_outside_the_engines():
    found = []
    for path in _files():
        rel = str(path.relative_to(REPO))
        text = path.read_text()
        lines = _python_code(text) if path.suffix == ".py" else _workflow_code(text)
        for number, line in enumerate(lines, 1):
            if NAMES.search(line) and not _allowed(rel, line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, (
        "engine names outside src/tunelab/engines/ (move the knowledge behind the engine "
        "contract, or add a commented entry to ALLOWED):\n" + "\n".join(found)
    )


def test_the_allowlist_has_no_stale_entry():
    used = set()
    for path in _files():
        rel = str(path.relative_to(REPO))
        text = path.read_text()
        lines = _python_code(text) if path.suffix == ".py" else _workflow_code(text)
        for line in lines:
            for i, (files, pattern, _) in enumerate(ALLOWED):
                if fnmatch.fnmatch(rel, files) and re.search(pattern, line) and NAMES.search(line):
                    used.add(i)
    assert used == set(range(len(ALLOWED))), [ALLOWED[i] for i in set(range(len(ALLOWED))) - used]


# -- a SQLite run needs no other engine's driver ------------------------------------------------
# Every server engine's driver is hidden: any attempt to import one is recorded (even where the
# ImportError is caught) and fails the command.
HIDE_DRIVERS = textwrap.dedent(
    """
    import sys

    HIDDEN = {"ibm_db", "ibm_db_dbi", "MySQLdb", "psycopg", "psycopg_binary", "psycopg_c"}
    tried = []


    class Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                tried.append(name)
                raise ImportError(f"{name} is hidden")
            return None


    sys.meta_path.insert(0, Hide())
    for name in [m for m in sys.modules if m.split(".")[0] in HIDDEN]:
        del sys.modules[name]
    from tunelab.cli import main

    try:
        code = main(sys.argv[1:])
    finally:
        if tried:
            print("imported a hidden driver:", *tried, file=sys.stderr)
    sys.exit(1 if tried else code)
    """
)


def _tunelab_without_drivers(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TUNELAB_LOCK_DIR": str(tmp_path / "lock")}  # a private bench lock
    return subprocess.run(
        [sys.executable, "-c", HIDE_DRIVERS, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.slow
def test_a_sqlite_run_imports_no_other_engines_driver(write_sweep, tmp_path):
    from tunelab.sweep import spec

    sweep = write_sweep(
        """
        name: nodrivers
        engines: [sqlite]
        dataset: {rows: 2000, seed: 3}
        knobs: {buffer_pool: [100], index: [nonclustered]}
        workloads: [{type: point, lookups: 50}]
        cache: cold
        repetitions: 1
        trace: true
        """
    )
    points, errors = spec.expand(sweep)
    assert not errors, errors
    point = points[0].point_id
    out = tmp_path / "p.csv"
    common = ("--workdir", str(tmp_path / "work"), "--data-dir", str(tmp_path / "data"))
    for args in (
        ("engines",),
        ("validate", "--engine", "sqlite", str(sweep)),
        ("plan", "--sql", str(sweep)),
        ("preflight", "sqlite"),
        ("run-point", str(sweep), point, "--out", str(out), *common),
        ("trace-point", str(sweep), point, "--out", str(tmp_path / "t.npz"), *common),
    ):
        done = _tunelab_without_drivers(tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr)
    assert out.exists()
