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

# %% [markdown]
# # Quickstart: cluster data without choosing the number of clusters
#
# A Dirichlet-process mixture decides how many clusters the data needs: you give an upper bound
# (`truncation`), and clusters the data does not support are emptied and dropped. This page fits
# one to scikit-learn's handwritten digits, predicts, and looks at the result. Five minutes.
#
# **Install**, in a clone of the repository (Python 3.11 or newer; torch's CPU build, no GPU needed):
#
# ```
# make install                  # builds .venv/ with torch and bnpzoo (about 2 minutes)
# source .venv/bin/activate     # puts python and the command-line tool bnpzoo on the PATH
# ```

# %%
import bnpzoo  # first: it sets torch's threads to behave on a shared machine (bnpzoo.threads)
import matplotlib.pyplot as plt
import numpy as np

from bnpzoo import DPGMM
from bnpzoo.data import digits
from bnpzoo.metrics import acc, nmi

data = digits()  # 1797 images of 8 x 8 pixels in [0, 1], with their true digits
X, y = data.X, data.labels
print(X.shape, bnpzoo.__version__)

# %% [markdown]
# ## Fit
# The estimator works like scikit-learn's: parameters in the constructor, `fit(X)`, then
# `predict`. The default learner (`inference="vmm"`) is a fast batch algorithm; every default was
# chosen on data other than this.

# %%
model = DPGMM(truncation=50, random_state=0).fit(X)
labels = model.predict(X)
print(f"{model.n_clusters_} clusters in {model.fit_seconds_:.2f} s; "
      f"against the true digits: NMI {nmi(y, labels):.3f}, ACC {acc(y, labels):.3f}")

# %% [markdown]
# `predict_proba` gives each row's cluster probabilities, `score_samples` its log predictive
# density (use it to flag outliers), and `save` / `DPGMM.load` keep everything.

# %%
proba = model.predict_proba(X[:3])
print(np.round(proba.max(1), 3), model.score_samples(X[:3]).round(1))

# %% [markdown]
# ## Look at it
# Each cluster's mean is an image. The clusters come ordered by weight; the title is the digit
# most of its members are.

# %%
fig, axes = plt.subplots(2, 8, figsize=(10, 3.6))
for k, ax in enumerate(axes.ravel()):
    ax.axis("off")
    if k < model.n_clusters_:
        ax.imshow(model.means_[k].reshape(8, 8), cmap="gray_r")
        ax.set_title(f"{np.bincount(y[labels == k]).argmax()}  ({model.weights_[k]:.0%})", fontsize=9)
fig.suptitle("cluster means (most common digit, weight)")
fig.tight_layout()

# %% [markdown]
# ## From the command line
# The same fit, with a JSON line for scripts:
#
# ```
# bnpzoo fit dp-gmm --data digits --json
# bnpzoo compare --data digits        # every model and learner on one data set, a table and a figure
# ```
#
# ## Where next
# - `01_dp_gmm`: the model as a Pyro program, the batch and SVI learners, the bound.
# - `02_stochastic_learners`: minibatch learners for data that is large.
# - `03_pyp_ggm`, `04_coupled_dp`, `05_hdp_gd`: the other models.
# - `06_model_comparison`: which model fits your data better (ArviZ, LOO).
# - `07_extending_a_model`: copy a program, change its likelihood, fit it.
