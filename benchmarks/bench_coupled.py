"""The coupled latent-DP sampler against tomotopy's and gensim's HDP (issue 4), and its chains on
digits-bags. Writes benchmarks/reports/coupled.md and coupled.png.

Text: gensim's bundled ``head500.noblanks.cor`` (250 stemmed Wikipedia articles, one a line). Rule:
each article is cut into documents of 100 tokens; even-numbered documents of every article are the
training half, odd-numbered ones the test half; the group of a document is its article's block of
5 consecutive articles (50 groups, in corpus order, which m-ldp's |t - s| reads). Every model runs
the same number of iterations (sweeps), single-threaded, and is scored by
``bnpzoo.metrics.completion_perplexity`` on the test half. tokens/s = iterations x training
tokens / sampling seconds. The coupled models get a pool of about 150 atoms each (3 per latent DP
for m-ldp's 51 and sngp's 50 latent DPs, 150 for s-ldp's one) and beta = 0.01 (tomotopy's eta).

[Coupled-DP]'s figures, on this corpus: perplexity against the number of training documents (Fig. 4:
random subsets of the training half, the same for every model) and m-ldp's against sigma (Fig. 5).

    python benchmarks/bench_coupled.py [--iters 100] [--chains-sweeps 100]

Needs the benchmark extra: pip install -e .[bench]
"""

import argparse
import datetime
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from bnpzoo import CoupledDP
from bnpzoo.corpus import digits_bags
from bnpzoo.metrics import completion_perplexity

REPORT = Path(__file__).parent / "reports" / "coupled.md"
ATOMS_PER_SOURCE = {"m-ldp": 3, "sngp": 3, "s-ldp": 150}  # a pool of ~150 atoms each
SIGMAS = (0.25, 0.5, 1.0, 2.0, 4.0)
FRACTIONS = (0.25, 0.5, 1.0)


def head500(chunk=100, block=5):
    from gensim.test.utils import datapath

    train, test, groups = [], [], []
    for article, line in enumerate(Path(datapath("head500.noblanks.cor")).read_text().splitlines()):
        words = line.split()
        for j, start in enumerate(range(0, len(words), chunk)):
            (train if j % 2 == 0 else test).append(words[start:start + chunk])
            if j % 2 == 0:
                groups.append(article // block)
    return train, test, np.array(groups)


def tomotopy_hdp(train, test, iters):
    import tomotopy as tp

    model = tp.HDPModel(seed=0)
    for doc in train:
        model.add_doc(doc)
    model.train(0, workers=1)
    start = time.perf_counter()
    model.train(iters, workers=1)
    seconds = time.perf_counter() - start
    topics = np.array([model.get_topic_word_dist(k) for k in range(model.k) if model.is_live_topic(k)])
    return completion_perplexity(topics, list(model.used_vocabs), test), seconds, model.live_k


def gensim_hdp(train, test, iters):
    from gensim.corpora import Dictionary
    from gensim.models import HdpModel

    vocab = Dictionary(train)
    bows = [vocab.doc2bow(doc) for doc in train]
    start = time.perf_counter()
    # online VI: its per-chunk cost on a 14k-word vocabulary is high, so it gets a time limit
    # (a few passes) rather than the samplers' iteration count
    model = HdpModel(bows, vocab, chunksize=256, random_state=0, max_time=60)
    seconds = time.perf_counter() - start
    topics = model.get_topics()
    topics = topics / topics.sum(1, keepdims=True)
    return completion_perplexity(topics, [vocab[i] for i in range(len(vocab))], test), seconds, topics.shape[0]


def coupled(config, train, test, groups, iters, **options):
    est = CoupledDP(config=config, truncation=ATOMS_PER_SOURCE[config], beta=0.01, max_iter=iters - 20, warmup=20,
                    random_state=0, **options).fit(train, groups)
    return est.perplexity(test), est.tokens_per_second_, est.n_clusters_


def figure(sizes, sigmas, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, points in sizes.items():
        left.plot(*zip(*points), "o-", label=name)
    left.set(xlabel="training documents", ylabel="held-out perplexity", title="against training-set size (Fig. 4)")
    left.legend()
    right.plot(*zip(*sigmas), "o-", color="C1")
    right.set(xscale="log", xlabel="sigma", ylabel="held-out perplexity", title="m-ldp against sigma (Fig. 5)")
    right.set_xticks([sigma for sigma, _ in sigmas], [f"{sigma:g}" for sigma, _ in sigmas])
    right.minorticks_off()
    fig.suptitle("coupled latent DPs on head500 (completion perplexity, lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--chains-sweeps", type=int, default=100, help="warm-up and kept sweeps per digits chain")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    train, test, groups = head500()
    tokens = sum(map(len, train))
    rows, sizes = [], {}
    for fraction in FRACTIONS:
        keep = np.sort(np.random.default_rng(0).permutation(len(train))[: int(fraction * len(train))])
        part, part_groups = [train[i] for i in keep], groups[keep]
        perplexity, seconds, k = tomotopy_hdp(part, test, args.iters)
        sizes.setdefault("tomotopy HDP", []).append((len(part), perplexity))
        if fraction == 1:
            reference = args.iters * tokens / seconds
            rows.append(("tomotopy HDPModel", perplexity, reference, k))
        for config in ATOMS_PER_SOURCE:
            perplexity, rate, k = coupled(config, part, test, part_groups, args.iters)
            sizes.setdefault(config, []).append((len(part), perplexity))
            if fraction == 1:
                rows.append((f"bnpzoo CoupledDP {config}", perplexity, rate, k))
        print(fraction, {name: points[-1] for name, points in sizes.items()}, flush=True)
    sigmas = [(sigma, coupled("m-ldp", train, test, groups, args.iters, sigma=sigma)[0]) for sigma in SIGMAS]
    print("sigma", sigmas, flush=True)
    perplexity, seconds, k = gensim_hdp(train, test, args.iters)
    rows.append(("gensim HdpModel (online VI, 60 s)", perplexity, float("nan"), k))
    print(rows, flush=True)

    bags = digits_bags()
    est = CoupledDP(config="scenes", truncation=10, max_iter=args.chains_sweeps, warmup=args.chains_sweeps,
                    num_chains=4, random_state=0).fit(bags)
    print("digits-bags rhat", est.rhat_, flush=True)

    figure(sizes, sigmas, REPORT.with_suffix(".png"))
    lines = [
        f"# Coupled latent DPs: perplexity and speed ({datetime.date.today()}, {platform.machine()}, "
        f"{platform.processor() or 'cpu'}, single thread for every model)", "",
        f"head500.noblanks.cor: {len(train)} training documents ({tokens} tokens) in {groups.max() + 1} groups, "
        f"{len(test)} test documents; {args.iters} iterations each.", "",
        "| model | held-out perplexity | tokens/s | ratio to tomotopy | topics |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {p:.1f} | " + (f"{rate:,.0f} | {rate / reference:.2f}" if np.isfinite(rate) else "- | -")
              + f" | {k} |" for name, p, rate, k in rows]
    lines += ["", "Against the number of training documents (random subsets of the training half, the same for every "
              "model). Each model scores the test tokens of its own training vocabulary, which grows with the "
              "training set, so compare models within a column, not along a row:", "",
              "| model | " + " | ".join(str(n) for n, _ in sizes["m-ldp"]) + " |",
              "|---|" + "---|" * len(FRACTIONS)]
    lines += [f"| {name} | " + " | ".join(f"{p:.1f}" for _, p in points) + " |" for name, points in sizes.items()]
    lines += ["", "m-ldp against sigma: " + ", ".join(f"{sigma:g}: {p:.1f}" for sigma, p in sigmas), "",
              "![perplexity against training-set size and sigma](coupled.png)", ""]
    lines += [f"digits-bags (scenes set-up, 10 atoms per latent DP): 4 chains x ({args.chains_sweeps} warm-up + "
              f"{args.chains_sweeps} kept sweeps) under pyro.infer.MCMC: R-hat of the log joint {est.rhat_:.4f}; "
              f"{est.tokens_per_second_:,.0f} tokens/s; {est.sampling_seconds_:.0f} s."]
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
