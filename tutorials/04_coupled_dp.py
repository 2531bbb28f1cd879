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
# # Coupled mixtures through latent Dirichlet processes ([Coupled-DP])
#
# Groups of data (years of papers, scene categories, digit classes) each get a mixture D_t,
# built from shared latent DPs: D_t = sum_s c_ts S_{q_ts}(H_s), where S_q keeps each atom of H_s
# with probability q_ts. The inheritance matrix q says which groups share what:
# `s-ldp` (one latent DP), `m-ldp` (a local one per group plus a global one), `sngp`
# (windows of local ones, no sub-sampling) or your own matrix.
#
# `bnpzoo.CoupledDP` fits it with a Gibbs sampler that runs under `pyro.infer.MCMC`; here on
# `digits-bags`: each 8x8 digit is a bag of pixel tokens, grouped by class.

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np

from bnpzoo import ConvergenceWarning, CoupledDP
from bnpzoo.corpus import digits_bags
from bnpzoo.diagnostics import arviz
from bnpzoo.models.coupled_configs import inheritance_matrix

az = arviz()  # ArviZ itself, without its once-a-day notice about the coming 1.x

bags = digits_bags()
print(len(bags.docs), "documents,", sum(map(len, bags.docs)), "tokens,", len(set(bags.groups)), "groups")

# %% [markdown]
# ## The configurations as q matrices
#
# Rows are groups, columns latent DPs. The `scenes` set-up of section 5.2 gives each class a
# local latent DP (q = 1), lets the other classes inherit from it at 0.2, and adds a global one at 0.5.

# %%
fig, axes = plt.subplots(1, 3, figsize=(10, 3))
for ax, name in zip(axes, ["m-ldp", "sngp", "scenes"]):
    ax.imshow(inheritance_matrix(name, 10), vmin=0, vmax=1, cmap="viridis")
    ax.set_title(name)
    ax.set_xlabel("latent DP s")
axes[0].set_ylabel("group t")
plt.tight_layout()

# %% [markdown]
# ## Two chains under `pyro.infer.MCMC`
#
# Each MCMC sample is one sweep of the sampler (or `thin` sweeps); what MCMC stores are
# fixed-shape summaries (log joint, atoms per latent DP, atoms per group, concentrations), so
# that R-hat, ESS and ArviZ work. Digits-bags repeats its 64 pixel tokens many times within a
# class (562k tokens, 517 (class, pixel) cells), so `label_step="blocked"` draws each cell's
# labels as one multinomial instead of token by token; the document level, the default for token
# lists, draws token by token, so here it is off (`est.documents_`). The benchmark runs 4 chains of 102,000
# sweeps (see `benchmarks/reports/coupled_rhat.md`); these two are far too short to converge, and
# the fit says so: a `bnpzoo.ConvergenceWarning` with the sweeps it would need, caught and printed here.

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", ConvergenceWarning)
    est = CoupledDP(config="scenes", truncation=6, label_step="blocked", max_iter=100, warmup=100, num_chains=2,
                    random_state=0).fit(bags)
for warning in caught:
    print("the fit warns:", warning.message)
print(f"{est.tokens_per_second_:,.0f} tokens/s; R-hat of the log joint: {est.rhat_:.3f}")
idata = est.to_arviz()
az.plot_trace(idata, var_names=["log_joint"])
plt.tight_layout()

# %% [markdown]
# ## What the groups share
#
# `group_weights_` is each class's mixture over the atoms that hold data; `topic_word_` each
# atom's pixel distribution, shown as an 8x8 image.

# %%
order = [int(token[1:]) for token in est.vocabulary_]
images = np.zeros((est.n_clusters_, 64))
images[:, order] = est.topic_word_
top = min(8, est.n_clusters_)
fig, axes = plt.subplots(1, top + 1, figsize=(2 * (top + 1), 2.2), gridspec_kw={"width_ratios": [3] + [1] * top})
axes[0].imshow(est.group_weights_[:, :top], cmap="magma")
axes[0].set(xlabel="atom", ylabel="digit class", title="D_t")
for k in range(top):
    axes[k + 1].imshow(images[k].reshape(8, 8), cmap="gray_r")
    axes[k + 1].set_axis_off()
    axes[k + 1].set_title(f"atom {k}")
plt.tight_layout()

# %% [markdown]
# ## Held-out perplexity
#
# `perplexity` is `bnpzoo.metrics.completion_perplexity`: each document's topic proportions are
# fitted on its even-position tokens and its odd-position tokens are scored. Here on the training
# bags themselves (a held-out corpus is scored the same way; the CLI takes it as `--test-data`).

# %%
print(f"completion perplexity: {est.perplexity(bags.docs[:300]):.1f} (uniform over the pixels: {len(est.vocabulary_)})")
