"""IBM's conversions, the write-model fit and the run-to-run spread."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunelab.calibrate import model


@pytest.mark.parametrize(
    ("page", "expected"), [(4096, 0.04), (8192, 0.08), (16384, 0.16), (32768, 0.32)]
)
def test_db2_default_transferrate_table(page, expected):
    # IBM's table for the default DEVICE READ RATE of 100 MB/s
    assert model.transferrate_ms(model.DB2_DEFAULT_DEVICE_READ_RATE_MB_S, page) == pytest.approx(
        expected
    )


def test_ibm_example_800_mb_s_gives_004_ms_per_32k_page():
    assert model.transferrate_ms(800, 32768) == pytest.approx(0.04)
    # the same device read as kB/s by iozone: 798027.88 kB/s is almost 800 MB/s in DB2's MB
    assert model.mb_per_s(798027.88 * 1024) == pytest.approx(798.03, rel=1e-4)


def test_overhead_is_random_read_less_one_page_transfer():
    assert model.overhead_ms(6.765, 100, 4096) == pytest.approx(6.725)
    assert model.overhead_ms(0.5, 800, 32768) == pytest.approx(0.46)


@settings(max_examples=60, deadline=None)
@given(
    overhead_s=st.floats(1e-5, 2e-2),
    rate=st.floats(5e6, 5e9),
)
def test_fit_recovers_exact_parameters(overhead_s, rate):
    sizes = np.array([1, 4, 16, 64, 256, 1000]) * 4096.0
    fit = model.fit_write_model(sizes, overhead_s + sizes / rate)
    assert fit.overhead_s == pytest.approx(overhead_s, rel=1e-6, abs=1e-12)
    assert fit.rate_bytes_s == pytest.approx(rate, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)


def test_fit_recovers_parameters_through_noise():
    rng = np.random.default_rng(7)
    overhead_s, rate = 0.000425, 177.5e6  # the HADR simulator's example disk
    sizes = np.repeat(np.array([1, 4, 16, 64, 256, 1000]) * 4096.0, 5)
    times = (overhead_s + sizes / rate) * rng.normal(1.0, 0.03, sizes.size)
    fit = model.fit_write_model(sizes, times)
    assert fit.overhead_s == pytest.approx(overhead_s, rel=0.15)
    assert fit.rate_bytes_s == pytest.approx(rate, rel=0.05)
    assert 0.99 < fit.r2 < 1.0
    assert fit.throughput_bytes_s(4096) == pytest.approx(4096 / fit.seconds(4096))


def test_fit_of_noise_has_low_r2_and_flat_time_has_no_rate():
    rng = np.random.default_rng(3)
    sizes = np.repeat([4096.0, 65536.0, 1048576.0], 6)
    noisy = model.fit_write_model(sizes, rng.uniform(1e-3, 2e-3, sizes.size))
    assert noisy.r2 < 0.5
    flat = model.fit_write_model([4096.0, 8192.0, 16384.0], [1e-3, 0.9e-3, 0.8e-3])
    assert flat.rate_bytes_s is None
    assert flat.seconds(1e9) == pytest.approx(flat.overhead_s)


def test_fit_needs_two_sizes():
    with pytest.raises(ValueError, match="two distinct"):
        model.fit_write_model([4096.0, 4096.0], [1e-3, 2e-3])


def test_spread():
    s = model.spread([1.0, 2.0, 3.0])
    assert (s.mean, s.std, s.cv) == pytest.approx((2.0, 1.0, 0.5))
    assert s.high
    assert not model.spread([10.0, 10.1, 9.9]).high
    one = model.spread([4.0])
    assert math.isnan(one.cv) and not one.high


def test_postgres_ratio_and_cost():
    # DB2's defaults read as PostgreSQL: a random 8K page costs OVERHEAD + TRANSFERRATE
    ratio = model.pg_random_seq_ratio(6.725 + 0.08, 100)
    assert ratio == pytest.approx(6.805 / 0.08)
    assert model.pg_random_page_cost(40.0) == pytest.approx(model.PG_DEFAULT_RANDOM_PAGE_COST)
    assert model.pg_random_page_cost(3.0) == 1.0  # never below seq_page_cost
