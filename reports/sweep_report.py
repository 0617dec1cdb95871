# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
results_csv = "results/example.csv"  # result rows (tunelab.store.results columns)
sweep_name = ""  # rows of this sweep only; "" = the sweep file's name
sweep_file = "workflows/sweeps/example.yaml"
calibration_json = ""  # fio calibration of the device, or ""
bpsim_csv = ""  # buffer-pool simulator curve, or ""
verdicts_json = ""  # the verdicts `tunelab check --json` stored, or "": judged here
title = ""

# %%
# One sweep's report, rendered with inputs hidden by `tunelab report`. All plotting and table
# logic lives in tunelab.report; this file only says what goes where.
from tunelab.sweep import claimspec
from tunelab.analysis import claims
from tunelab.report import methods
from tunelab.report.page import appendix, callouts, logship
from tunelab.report import data as report_data
from tunelab.report.page import figures_section, findings_section, header_section, io_section
from tunelab.report.page import measured_section, optional_sections, times_section
from tunelab.report.fragments import show

data = report_data.load(results_csv, sweep_file, sweep_name)
show(header_section.header_html(data, title))
show(callouts.checks_html(data))

# %% [markdown]
# ## Findings

# %%
# The verdicts `tunelab check` stored for these rows (the index shows the same); judged here
# only when the report is rendered on its own.
if verdicts_json:
    stored = findings_section.stored_verdicts(verdicts_json)
else:
    judged_by, _ = claimspec.sweep_claims(data.sweep, data.sweep_file, data.engine)
    stored = [v.to_json() for v in claims.evaluate_sweep(judged_by, data.results, data.engine)]
show(findings_section.claims_html(stored))

# %% [markdown]
# ## Response time and throughput

# %%
show(figures_section.figures_html(data))

# %%
show(figures_section.locking_html(data))

# %%
show(logship.logship_html(data))

# %% [markdown]
# ## What was measured

# %%
show(measured_section.measured_html(data))

# %% [markdown]
# ## Methods

# %%
show(methods.methods_html(data, calibration_json))

# %% [markdown]
# ## Summary per point

# %%
show(measured_section.summary_html(data))

# %%
show(times_section.engine_time_html(data))

# %%
show(times_section.per_query_html(data))

# %% [markdown]
# ## I/O: reads, their rates, and hit ratios

# %%
show(io_section.io_html(data))

# %%
show(optional_sections.device_html(data, calibration_json))

# %%
show(optional_sections.simulator_html(data, bpsim_csv))

# %% [markdown]
# ## Raw rows

# %%
show(appendix.raw_html(data))

# %% [markdown]
# ## Provenance

# %%
show(appendix.provenance_html(data))
