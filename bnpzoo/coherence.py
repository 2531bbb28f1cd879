"""Topic coherence: NPMI of each topic's top words over a reference corpus.

A topic modeller judges topics by whether their top words occur together in text. The measure here
is gensim's ``CoherenceModel(coherence="c_npmi")`` (Röder, Both and Hinneburg, "Exploring the space
of topic coherence measures", WSDM 2015; Bouma's normalised PMI), computed the same way:

- the reference texts are cut into virtual documents by a window of ``window_size`` tokens sliding
  one token at a time (a text shorter than the window is one virtual document); every token counts
  for the positions, whether or not it is a top word; which words a window holds follows gensim's
  sliding update (``window_counts``), which forgets a word repeated inside a window once one of its
  copies leaves it (an exact count of the windows holding each word differs by 0.002 to 0.02 in NPMI
  on lee_background);
- P(w) is the share of windows holding w, P(w, w') of windows holding both;
- NPMI(w, w') = ln((P(w, w') + eps) / (P(w) P(w'))) / -ln(P(w, w') + eps), eps = 1e-12: 1 for words
  that only occur together, 0 for independent ones, about -1 for words never seen together;
- a topic's coherence is the mean over the pairs of its ``top`` words, the model's the mean over
  topics.

Top words that never occur in the reference texts have P(w) = 0; gensim then divides by zero. Here
such a pair scores -1 (never seen together), and ``npmi_coherence`` says how many words were missing
where the caller asks (``missing``).
"""

import numpy as np

EPSILON = 1e-12  # gensim's, in the log ratio and its normaliser
WINDOW = 10  # gensim's default window for c_npmi


def window_counts(texts, words: list[str], window_size: int | None = WINDOW) -> tuple[np.ndarray, np.ndarray, int]:
    """(windows holding each of ``words`` (W,), windows holding each pair (W, W), windows) over the
    token lists ``texts``, windows of ``window_size`` tokens sliding by one (None: each text is one
    window, for documents whose token order is lost, such as a count matrix's rows), held as gensim's
    ``WordOccurrenceAccumulator`` holds them: a text's first window holds its words; each slide
    drops the token that left at the left edge and adds the one that came in at the right, in that
    order, so a word that left the edge counts as gone even where it also occurs inside the window,
    until it comes in again at the right edge."""
    index = {word: i for i, word in enumerate(words)}
    single = np.zeros(len(words), dtype=np.int64)
    joint = np.zeros((len(words), len(words)), dtype=np.int64)
    windows = 0
    for text in texts:
        size = len(text) if window_size is None else window_size
        starts = max(1, len(text) - size + 1)  # a text shorter than the window is one window
        windows += starts
        ids = np.fromiter((index.get(token, -1) for token in text), np.int64, len(text))
        positions = np.flatnonzero(ids >= 0)
        if not positions.size:
            continue
        present, column = np.unique(ids[positions], return_inverse=True)
        # each word's events by window: dropped at the window after the one it began (position p
        # leaves at window p + 1), then added in the first window, or in window p - w + 1 where it
        # comes in at the right; its state is that of its last event
        state = np.full((starts, present.size), -1, dtype=np.int8)
        leaves = positions + 1 < starts
        state[positions[leaves] + 1, column[leaves]] = 0
        state[np.maximum(positions - size + 1, 0), column] = 1
        last = np.maximum.accumulate(np.where(state >= 0, np.arange(starts)[:, None], 0), axis=0)
        held = (np.take_along_axis(state, last, axis=0) == 1).astype(np.int64)  # (windows, present words)
        single[present] += held.sum(0)
        joint[np.ix_(present, present)] += held.T @ held
    return single, joint, windows


def npmi_coherence(topics: list[list[str]], texts, window_size: int | None = WINDOW,
                   missing: list | None = None) -> np.ndarray:
    """Each topic's NPMI coherence (the module docstring), (len(topics),), from its top words
    ``topics[k]`` over the token lists ``texts`` (windows of ``window_size`` tokens; None: whole
    texts); ``missing``, a list, receives the top words that never occur in the texts."""
    words = list(dict.fromkeys(word for topic in topics for word in topic))
    single, joint, windows = window_counts(texts, words, window_size)
    if missing is not None:
        missing.extend(word for word, count in zip(words, single) if count == 0)
    p = single / windows
    joint_p = joint / windows
    index = {word: i for i, word in enumerate(words)}
    scores = np.empty(len(topics))
    for k, topic in enumerate(topics):
        ids = np.array([index[word] for word in topic])
        a, b = np.triu_indices(len(ids), 1)
        a, b = ids[a], ids[b]
        together = joint_p[a, b] + EPSILON
        with np.errstate(divide="ignore"):
            pmi = np.log(together / (p[a] * p[b]))
        npmi = np.where((p[a] > 0) & (p[b] > 0), pmi / -np.log(together), -1.0)
        scores[k] = npmi.mean() if npmi.size else np.nan
    return scores
