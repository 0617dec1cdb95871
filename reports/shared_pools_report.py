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
curves_csv = "results/shared-pools.csv"  # `tunelab bpsim-shared --out`
title = "shared-pools"

# %%
# The shared-pools page, rendered with inputs hidden by `tunelab report-shared-pools`. All
# plotting and table logic lives in tunelab.report.shared_pools.
from tunelab.report import shared_pools as sp
from tunelab.report.fragments import show

curves = sp.load(curves_csv)
show(sp.header_html(curves, title))
show(sp.intro_html())

# %% [markdown]
# ## What the curves show against the slides

# %%
show(sp.reading_html(curves))

# %% [markdown]
# ## GBP hit ratio and physical reads against the GBP's size

# %%
show(sp.figures_html(curves))

# %% [markdown]
# ## The GBP knee against the rule of thumb

# %%
show(sp.knees_html(curves))

# %% [markdown]
# ## What a larger LBP buys (at the largest GBP)

# %%
show(sp.lbp_html(curves))
