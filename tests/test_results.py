from __future__ import annotations

import pandas as pd
import pytest

from tunelab.store import results


def test_rows_are_written_atomically_and_read_back(tmp_path):
    out = tmp_path / "r" / "p.csv"
    results.write_rows([{"a": 1, "knob_x": 2}, {"a": 3, "knob_x": 4}], out)
    assert pd.read_csv(out).to_dict("records") == [{"a": 1, "knob_x": 2}, {"a": 3, "knob_x": 4}]
    assert [p.name for p in out.parent.iterdir()] == ["p.csv"]  # no temp file left


def test_existing_results_are_never_silently_overwritten(tmp_path):
    out = tmp_path / "p.csv"
    results.write_rows([{"a": 1}], out)
    with pytest.raises(results.ResultExistsError, match="results exist already"):
        results.write_rows([{"a": 2}], out)
    assert pd.read_csv(out)["a"].tolist() == [1]


def test_swept_columns_are_those_that_vary(tmp_path):
    frame = pd.DataFrame({"knob_a": [1, 2], "knob_b": [5, 5], "wl_s": [0.1, 0.2], "x": [1, 2]})
    assert results.swept_columns(frame) == ["knob_a", "wl_s"]


def test_provenance_that_looks_like_a_number_stays_text(tmp_path):
    """A findings digest such as 2443e27572355759 reads as a float (inf) by default; the
    lab's readers keep it, and the commit, as written, through a round's journal too."""
    from tunelab.measure import sweeprun

    row = {
        "point_id": "p",
        "rep": 0,
        "elapsed_s": 1.0,
        "findings_digest": "2443e27572355759",
        "git_commit": "1234e5678901",
    }
    path = results.write_rows([row], tmp_path / "rows.csv")
    assert pd.read_csv(path)["findings_digest"].iloc[0] == float("inf")  # the trap
    back = results.read_results([path])
    assert back["findings_digest"].iloc[0] == "2443e27572355759"
    assert back["git_commit"].iloc[0] == "1234e5678901"
    journal = sweeprun.Journal(tmp_path / "s.csv.gz", [])
    journal.keep(0, [row], [])
    (kept,) = journal.finished()
    assert kept["findings_digest"].iloc[0] == "2443e27572355759"
