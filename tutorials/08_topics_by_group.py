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
# # Topics in text, and how groups share them
#
# `CoupledDP` is a topic model whose documents come in groups (years, sources, sections): each
# group's topic mixture is built from shared latent Dirichlet processes ([Coupled-DP]), so a topic
# can belong to every group or to a few. This tutorial fits it to real text that ships with SciPy:
# the documentation of SciPy's functions, one document per function, grouped by subpackage
# (`scipy.stats`, `scipy.signal`, ...). Which topics does each subpackage talk about, and which do
# they share?
#
# The model takes text in the forms people hold it in: raw strings (split by a tokenizer you can
# pass), scikit-learn's `CountVectorizer` matrix with its vocabulary, gensim's bags of words with
# its `Dictionary`, or lists of tokens.

# %%
import importlib
import inspect

import matplotlib.pyplot as plt  # noqa: F401  # loaded: bnpzoo's figures go through it, and show inline
import numpy as np

from bnpzoo import CoupledDP

SUBPACKAGES = ["fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse", "spatial",
               "special", "stats"]


def docstrings(name, most_words=60):
    """The description of each public function or class of scipy.<name> (its docstring up to the
    examples, the first ``most_words`` words)."""
    module = importlib.import_module(f"scipy.{name}")
    texts = []
    for attribute in sorted(getattr(module, "__all__", dir(module))):
        doc = inspect.getdoc(getattr(module, attribute, None)) if not attribute.startswith("_") else None
        if doc and len(doc.split()) >= 20:
            texts.append(" ".join(doc.split("Examples\n")[0].split()[:most_words]))
    return texts


texts, groups = [], []
for group, name in enumerate(SUBPACKAGES):
    found = docstrings(name)
    texts += found
    groups += [group] * len(found)
groups = np.array(groups)
print(f"{len(texts)} documents in {len(SUBPACKAGES)} groups; the first:\n{texts[0][:300]}")

# %% [markdown]
# ## Fitting raw text
#
# Texts are split by the default tokenizer (lower-cased words of two or more letters or digits, as
# `CountVectorizer` splits them). Stop words are the reader's choice: here scikit-learn's English
# list and the words every docstring uses. The subpackages have no order, so the configuration is
# `scenes` (each group its own latent DP, which the others inherit at 0.2, and a global one at 0.5);
# the default, `m-ldp`, couples neighbouring groups, for groups in an order such as years.

# %%
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

boilerplate = {"array", "arrays", "array_like", "ndarray", "optional", "default", "parameters", "returns", "int",
               "float", "bool", "none", "true", "false", "function", "functions", "value", "values", "given",
               "scipy", "numpy", "api", "cupy", "jax", "pytorch", "dask", "backends", "support", "math", "object",
               "type", "dtype", "input", "output", "used", "use", "using", "number", "shape", "axis", "func",
               "notes", "see", "also", "new", "version", "added", "data", "method", "result", "instance",
               "class", "str", "string", "tuple", "list", "dict", "callable", "compute", "computes", "calculate",
               "return", "default", "argument", "arguments", "specified", "otherwise"}
stop_words = sorted(ENGLISH_STOP_WORDS | boilerplate)
est = CoupledDP(config="scenes", max_iter=100, warmup=100, random_state=0, stop_words=stop_words).fit(texts, groups)
print(f"{est.n_tokens_:,} tokens, {est.n_topics_} topics holding at least 1 % of them "
      f"({est.n_clusters_} atoms hold some), fitted in {est.fit_seconds_:.1f} s")

# %% [markdown]
# ## The topics, largest first, with their coherence
#
# `top_words(n)` lists the topics that hold at least 1 % of the tokens (a Dirichlet process keeps a
# tail of atoms with a few tokens each; `top_words(n, topics="all")` shows those too).
# `coherence_` is each topic's NPMI over the training documents: how much more often its top words
# occur together, within 10 tokens, than apart (1: always together, 0: independent, -1: never),
# computed as gensim's `CoherenceModel(coherence="c_npmi")` computes it.

# %%
for k, words in enumerate(est.top_words(8)):
    print(f"topic {k:2d} ({est.weights_[k]:5.1%}, NPMI {est.coherence_[k]:+.2f}): {' '.join(words)}")
print(f"mean NPMI {np.mean(est.coherence_):.3f}")

# %% [markdown]
# ## Which subpackage talks about what
#
# `plot_prevalence` draws each group's mixture over the listed topics (its share of tokens by
# topic), each topic labelled by its top words. Topics that one subpackage owns sit alone in their
# column; shared ones (here, the language of arrays and dimensions) span several rows.

# %%
fig = est.plot_prevalence()
fig.axes[0].set_yticks(range(len(SUBPACKAGES)), [f"scipy.{name}" for name in SUBPACKAGES]);

# %% [markdown]
# ## New documents
#
# `transform` gives a new text's topic proportions (the topics held fixed; its columns are the
# topics `top_words` lists, in the same order), in any of fit's forms;
# `perplexity` scores held-out documents the same way.

# %%
new = ["Compute the inverse of a matrix and its determinant using an LU decomposition.",
       "Estimate the probability density of a normal distribution and test whether two samples differ."]
theta = est.transform(new)
for text, row in zip(new, theta):
    best = int(np.argmax(row))
    print(f"{text[:60]}... -> topic {best} ({row[best]:.0%}): {' '.join(est.top_words(5)[best])}")
