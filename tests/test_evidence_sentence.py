"""A verdict's evidence in one sentence: a ratio with its interval, and a count that is zero
on one side said in words, not as "0x [0, 0]"."""

from __future__ import annotations

from tunelab.report import evidence


def context(ratio: list[float], a: float, b: float) -> dict:
    return {
        "label": "warm",
        "ratio": ratio,
        "sides": [
            {"label": "buffer_pool 65536", "median": a},
            {"label": "buffer_pool 16", "median": b},
        ],
        "test": {"paired": False, "n_new": 6, "n_old": 6},
    }


def test_a_count_none_on_one_side_is_said_in_words():
    said = evidence.context_sentence(context([0.0, 0.0, 0.0], 0, 8352), "c_physical_reads")
    assert said == (
        "warm: buffer_pool 65536 0, buffer_pool 16 8352: none at buffer_pool 65536 "
        "over 6 and 6 repetitions"
    )


def test_a_ratio_keeps_its_interval():
    said = evidence.context_sentence(context([0.5, 0.4, 0.6], 100, 200), "c_physical_reads")
    assert said.endswith(": 0.5x [0.4, 0.6] over 6 and 6 repetitions")


def test_the_answers_table_says_none_for_a_count_none_on_side_a():
    from tunelab.report import questions

    assert questions._ratio_line({"contexts": [{"ratio": [0.0, 0.0, 0.0]}]}) == "none at a"
    assert questions._ratio_line({"contexts": [{"ratio": [0.5, 0.4, 0.6]}]}).startswith(
        "ratio a/b 0.5x [0.4, 0.6]"
    )


def test_a_trend_over_passes_says_passes():
    import numpy as np

    from tunelab.analysis import decisions

    positions = np.tile(np.arange(4.0), 6)
    values = positions * 2 + np.repeat(np.arange(6.0), 4) * 0.1
    rounds = np.repeat(np.arange(6), 4)
    said = decisions.trend(positions, values, rounds, unit="pass").text
    assert said.startswith("Page's L over 6 passes, p="), said
