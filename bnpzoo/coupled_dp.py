"""``bnpzoo.CoupledDP``: coupled nonparametric mixtures through latent DPs ([Coupled-DP]), fitted by
the Gibbs sampler of ``inference.coupled.gibbs`` under ``pyro.infer.MCMC``.

The one place that pairs ``models.coupled_dp`` with its sampler: it turns a grouped corpus (or
grouped real vectors) into a ``Problem``, runs the chains, keeps their summaries for ArviZ and the
final state of the best chain for prediction and perplexity.
"""

import dataclasses
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pyro
import torch

from bnpzoo._validation import FOLDER, FUNCTION, SEED, WORDS, AnyOf, Interval, OneOf, check_array
from bnpzoo.base import Estimator, FittedTensor
from bnpzoo.caller_state import keeps_caller_state
from bnpzoo.coherence import WINDOW, npmi_coherence
from bnpzoo.corpus import Corpus, as_sequence, fitted_positions, group_labels, keeps_token_order, to_documents
from bnpzoo.diagnostics import arviz, check_mixing
from bnpzoo.models.coupled_configs import CONFIGS, inheritance_matrix
from bnpzoo.models.coupled_dp import mixing_weights
from bnpzoo.threads import fit_threads

INFERENCE = ("gibbs",)
TOPIC_SHARE = 0.01  # a topic is listed (``n_topics_``, the CLI) when it holds at least this share of the tokens
TOP_WORDS = 10  # the top words a topic's coherence is measured on (``coherence_``)
POOL = 150  # atoms in the default pool for words (``truncation=None``)


def _rank_prefix(group) -> str:
    """The checkpoint files of this process's share of a data-parallel chain."""
    from bnpzoo.inference.data_parallel import rank, size

    return f"rank-{rank(group)}-of-{size(group)}-chain"


class CoupledDP(Estimator):
    """Groups of observations, each group's mixture D_t = sum_s c_ts S_{q_ts}(H_s) built from
    latent DPs H_s ~ DP(alpha_s B) ([Coupled-DP] eq. (6)-(8)); see ``models.coupled_dp``.

    ``fit(X, groups=None, vocabulary=None)``: X documents with ``groups`` one per document, in any
    of a topic model's usual forms (``bnpzoo.corpus.to_documents``): a sparse document-term count
    matrix (``CountVectorizer().fit_transform(texts)``, its ``get_feature_names_out()`` as
    ``vocabulary``), texts (split by ``tokenizer``), gensim's bags of words (its ``Dictionary`` as
    ``vocabulary``), token lists, or a ``bnpzoo.corpus.Corpus`` (its ``groups`` used unless given);
    or an N x D real array with ``groups`` one per row. The same corpus in any form is the same fit
    where its tokens come in the same order (a count matrix and bags of words give each document's
    tokens in word order). Words get the categorical family (topics with a symmetric
    Dirichlet(beta) base, the coupled topic model of section 5.1); real vectors get Gaussian
    atoms with a Normal-Gamma base per dimension. Groups are integers or names; their sorted distinct
    values are groups 0..T-1, in that order (which the distance between groups t and s of
    ``m-ldp`` and ``sngp`` reads), and ``group_values_`` keeps them.

    Parameters (keyword-only)
    ----------
    config : "s-ldp", "m-ldp", "sngp" or "scenes" (``models.coupled_configs``), the latent DPs and
        the inheritance probabilities q_ts.
    q : a groups x sources matrix of inheritance probabilities, overriding ``config``'s; None: the
        config's.
    inference : "gibbs", the coupled model's Gibbs sampler under ``pyro.infer.MCMC``
        (``inference.coupled``), the one learner.
    sigma : the coupling range of m-ldp and sngp.
    truncation : L, atoms per latent DP at the start (the sampler's pool holds S L atoms; an atom can
        move between latent DPs, so with many latent DPs a few each suffice). Every 10th warm-up
        sweep whose labels use 95 % of the pool grows it to 1.5 L atoms per latent DP
        (``gibbs.grown``), so the truncation does not bind; the kept sweeps run on the final pool
        (``truncation_``), and a fit whose kept samples still fill it warns. None: a pool of about 150 atoms for words
        (ceil(150 / S) each; on lee_background the default fit used 141 of 154 atoms, and pools of
        308 and 616 atoms 165 and 175 topics with held-out perplexity 1.5 % and 3.1 % worse), 10
        atoms per latent DP for real vectors.
    alpha : the latent DPs' concentration: a number fixes it; "sampled" samples it under
        Gamma(0.1, 0.1), as section 5.1 does; None (default): 1 with the document level, sampled
        at the group level. Sampled, it mixes slowly (``inference.coupled.gibbs``, step 7: a chain
        keeps about the value its start sets); with the document level, held-out perplexity was
        worse than with alpha = 1 on every corpus of ``benchmarks/bench_coupled_documents.py``
        (200 sweeps, 2 to 7 seeds: pang_lee 334 and 327 against 297 and 302, head500 2256 against
        2206, lee 1218 and 1226 against 1213 and 1210, trump_tweets 2945 against 2936); at the
        group level it was mixed (pang_lee 395 against 326, lee 1930 against 1949, trump_tweets 4584
        against 4878), so there the paper's prior stays (``reports/coupled_defaults.md``).
    beta : the topics' Dirichlet parameter; words only. None: 0.01, as tomotopy's and gensim's
        topic-word prior ([Coupled-DP]'s uniform base, beta = 1, is far too flat for text: on
        lee_background it found 8 topics and a perplexity of 2163 against 1406 with 0.01).
    prior_mean, prior_kappa, prior_shape, prior_rate : the Normal-Gamma base; real vectors only.
    label_step : how words' labels are drawn (``inference.coupled.gibbs``, step 1): "collapsed",
        token by token with the topics integrated out, one sequential pass; "approximate", the same
        on every core: the documents in shares, one a thread, each swept against its own copy of the
        topic counts, the copies meeting every 16,384 tokens a share (AD-LDA, Newman et al. 2009;
        ``inference.coupled.approximate``); not exact, and one share where a share would hold fewer
        than 32,768 tokens; "parallel", exact, with the topics drawn, so that documents (or tokens,
        at the group level) are swept in parallel on every core (``inference.coupled.parallel``);
        "uncollapsed", with the topics and every document's proportions drawn, so that every token is
        drawn at once, in torch on ``device`` (``inference.coupled.uncollapsed``); or "blocked", on
        (group, word) cells: topics drawn, then one multinomial per cell. None (default):
        "uncollapsed" on a GPU; with the document level, "approximate" on more than one thread or
        with ``data_parallel``; without it, "parallel" with ``data_parallel``, else "collapsed"
        (whose split-merge moves run at the group level only). Measured on two cores
        (``benchmarks/reports/coupled_parallel.md``): "approximate" held-out perplexity within seed
        noise of "collapsed" (enwiki 2,787 against 2,745, fine_foods 1,584 against 1,609, two seeds
        each) at about 1.3 times its tokens a second; "parallel" was faster a sweep only from about
        ten million tokens and needed about three times the sweeps for the same perplexity (with the
        topics drawn, a word's tokens rarely move to an atom that holds none of them);
        "uncollapsed" mixes slower still a sweep (``benchmarks/reports/gpu.md``). Blocked costs per
        cell, not per token, and pays where tokens repeat within groups (about 30x faster a sweep on
        digits-bags, though its log joint decorrelates about 3x slower a sweep:
        ``benchmarks/reports/speed.md``); it runs no split-merge moves (run on cells, they left that
        decorrelation as it was).
    documents : the document level (words only; ``models.coupled_dp``): each document d of group t
        has its own topic proportions theta_d ~ DP(doc_concentration, D_t), as in an HDP whose top
        level is D_t; without it every word of a group is a draw from D_t itself. None (default):
        on for words (token lists, a ``Corpus``) unless ``label_step="blocked"``, off for real
        vectors. On the four corpora of ``benchmarks/bench_coupled_documents.py`` it gave the lower
        held-out perplexity on every one (lee_background 1,120 against 1,793, head500 2,116
        against 2,754). Set False when a group is one topically pure unit (a bag of words).
    doc_concentration : b, how closely theta_d follows D_t (b -> infinity: the model without
        documents). The default, 1.0, stays fixed; None: sampled, under Gamma(1, 1)
        (``inference.coupled.gibbs``, ``update_doc_concentration``); ``doc_concentration_`` is its
        value in the kept state.
    split_merge : split-merge moves per group in each of the sampler's steps 3 and 6 (words only;
        ``inference.coupled.gibbs``): they carry a group's tokens between two atoms at once. On
        the topic-recovery test corpus they took recovery from 6 of 8 seeds to 8 of 8 in 80
        sweeps; on head500 one move per group and step costs about 40 % of a sweep. 0 turns
        them off.
    max_iter : samples per chain after warm-up (the topics average over them).
    warmup : warm-up sweeps per chain, before the samples.
    thin : sweeps per sample (1: every sweep is kept); the summaries and Pyro's bookkeeping cost
        about two thirds of a blocked sweep on digits-bags, so long runs there keep every 10th.
    num_chains : chains run by ``pyro.infer.MCMC``: in spawned worker processes where the machine
        has the cores (more than num_chains; a script that fits then needs Python's ``if __name__ ==
        "__main__":`` guard), one after the other otherwise.
    checkpoint : a folder where each chain saves its state every ``checkpoint_every`` sweeps and at
        its end (one file per chain, ``inference.checkpoint``). A fit given a folder that
        holds a stopped run's files resumes it: each chain replays its saved samples and sweeps on
        from its saved state and random generators, so the result equals the uninterrupted run's
        (on CPU, bitwise). The folder is kept; fitting again with a larger ``max_iter`` continues
        the chains. Files of other data or settings are refused. None: no checkpoints.
    checkpoint_every : sweeps between a chain's checkpoints.
    device : where the tokens lie and the label step runs, words only: None (default) or "cpu", the
        CPU; "cuda" (or "cuda:1", ...) runs step 1 uncollapsed in torch on that GPU, and the other
        steps, which read (groups x atoms) counts only, on the CPU. An uncollapsed chain starts
        with 100 collapsed sweeps on the CPU over random documents holding about a million tokens
        (``kernel.subset_start``; in ``sampling_seconds_``, not in ``n_iter_``). On one H200, 100 M
        generated tokens and 200 sweeps took 4 minutes (the CPU's defaults 49), with a held-out
        perplexity 4.7 % worse than the CPU's; on a million tokens it was no faster and 5.8 % worse
        (it mixes slower a sweep: ``benchmarks/reports/gpu.md``), so the CPU stays the default.
    random_state, verbose : seed, and Pyro's progress bar.
    data_parallel : one chain over the processes of the ``torch.distributed`` default process group
        (started by ``torchrun``, or your own): every process passes the whole corpus and sweeps its
        share of the documents (whole blocks of about 4,096 tokens), the counts meet by all-reduce
        every sweep, and every process ends with the same fit. With the default label step
        ("approximate") each process sweeps its share against the counts of the last sweep; with
        ``label_step="parallel"`` the chain's draws are those of one process with that step
        (``inference.coupled.parallel``). Words, one chain.

    tokenizer : how texts are split into tokens: a function of a string returning its tokens. None
        (default): ``bnpzoo.corpus.tokenize``, the lower-cased words of two or more letters or
        digits, as scikit-learn's ``CountVectorizer`` splits them. Code, so ``load`` takes it again.
    stop_words : words left out of every document, whatever its form: None (default), "english"
        (scikit-learn's list) or a list of words.

    Fitted attributes
    -----------------
    samples_ : MCMC's summaries by chain: log_joint, atoms_per_source, atoms_per_group, alpha.
    mcmc_ : the ``pyro.infer.MCMC`` object (``to_arviz()`` exports it).
    rhat_ : R-hat of the log joint across the chains; NaN with one chain (the default): run
        ``num_chains=2`` or more to have it.
    q_, n_groups_, truncation_, beta_ : the settings used, defaults resolved.
    group_values_ : the groups' labels as given (numbers or names), in the order of the group axis.
    n_clusters_ : atoms holding data, in the final state of the chain with the highest final log
        joint (as every attribute below but the timings).
    weights_ : the atoms' share of the data.
    group_weights_ : each group's D_t over the atoms, renormalised.
    group_counts_ : each group's tokens, or rows, on each atom.
    topic_word_ : words: E[phi | x] over the used atoms, each atom's (n_kw + beta) / (n_k + V beta)
        averaged over the kept sweeps since it last held no token.
    vocabulary_ : words: the word of each column of ``topic_word_``.
    means_, precisions_ : real vectors: the atoms' Gaussian parameters.
    n_features_in_, n_tokens_ : the vocabulary's size (or D), and the training tokens (or rows).
    n_iter_ : sweeps per chain.
    fit_seconds_, sampling_seconds_, tokens_per_second_ : the fit's wall time, the sampling's, and
        sweeps of all chains x training tokens / sampling seconds (after a resume, of the sweeps this
        fit ran).
    compile_seconds_ : before sampling, the sampler's compiled loops loaded from numba's cache, or
        compiled on the first fit of a new install (10 to 30 s, which ``verbose`` announces).
    n_topics_ : words: the topics listed, those holding at least ``TOPIC_SHARE`` = 1 % of the
        tokens, the first rows of ``topic_word_`` (a DP keeps a tail of atoms with a few tokens each,
        which ``top_words(topics="all")`` still shows).
    coherence_ : words: each listed topic's NPMI coherence over the training documents, its
        ``TOP_WORDS`` = 10 top words, windows of 10 tokens, as gensim's
        ``CoherenceModel(coherence="c_npmi")`` (``bnpzoo.coherence``); for a count matrix or bags of
        words, whose documents have lost their token order, whole documents. ``coherence(docs)``
        computes it over a reference corpus.
    doc_concentration_ : the document level's b in the kept state.
    documents_ : whether the document level ran.
    tensors_ : the tensors behind the fitted arrays.
    """

    _parameter_constraints = {
        "config": OneOf(*CONFIGS),
        "sigma": Interval(float, 0, low_open=True),
        "truncation": Interval(int, 1, optional=True),
        "inference": OneOf(*INFERENCE),
        "alpha": AnyOf(Interval(float, 0, low_open=True, optional=True), OneOf("sampled")),
        "beta": Interval(float, 0, low_open=True, optional=True),
        "prior_mean": Interval(float),
        "prior_kappa": Interval(float, 0, low_open=True),
        "prior_shape": Interval(float, 0, low_open=True),
        "prior_rate": Interval(float, 0, low_open=True),
        "label_step": OneOf(None, "collapsed", "blocked", "parallel", "approximate", "uncollapsed"),
        "documents": OneOf(None, True, False),
        "doc_concentration": Interval(float, 0, low_open=True, optional=True),
        "split_merge": Interval(int, 0),
        "max_iter": Interval(int, 1),
        "thin": Interval(int, 1),
        "warmup": Interval(int, 0),
        "num_chains": Interval(int, 1),
        "checkpoint": FOLDER,
        "checkpoint_every": Interval(int, 1),
        "random_state": SEED,
        "verbose": OneOf(True, False),
        "data_parallel": OneOf(False, True),
        "tokenizer": FUNCTION,
        "stop_words": AnyOf(OneOf(None, "english"), WORDS),
    }
    _unsaved_params = _optional_code = ("tokenizer",)  # code: ``load(path, tokenizer=...)`` takes it again
    _fit_call = "fit(X, groups)"
    # the fitted parameters: numpy arrays to the caller, tensors in ``tensors_`` (``bnpzoo.base.FittedTensor``)
    weights_, group_weights_, topic_word_ = FittedTensor(), FittedTensor(), FittedTensor()
    group_counts_ = FittedTensor()
    means_, precisions_ = FittedTensor(), FittedTensor()
    _fitted_attributes = ("q_", "n_groups_", "n_clusters_", "weights_", "topic_word_", "vocabulary_", "means_",
                          "precisions_", "n_features_in_", "n_tokens_", "n_iter_", "fit_seconds_",
                          "sampling_seconds_", "tokens_per_second_", "rhat_", "samples_", "group_values_",
                          "group_weights_", "truncation_", "beta_", "documents_",
                          "compile_seconds_", "doc_concentration_", "n_topics_", "coherence_", "group_counts_")

    def __init__(self, *, config="m-ldp", q=None, sigma=1.0, truncation=None, inference="gibbs", alpha=None,
                 beta=None, prior_mean=0.0, prior_kappa=1.0, prior_shape=1.0, prior_rate=1.0, label_step=None,
                 documents=None, doc_concentration=1.0, split_merge=1, max_iter=200, warmup=100, thin=1,
                 num_chains=1, checkpoint=None, checkpoint_every=50, device=None, random_state=None, verbose=False,
                 data_parallel=False, tokenizer=None, stop_words=None):
        self.config = config
        self.q = q
        self.sigma = sigma
        self.truncation = truncation
        self.inference = inference
        self.alpha = alpha
        self.beta = beta
        self.label_step = label_step
        self.documents = documents
        self.doc_concentration = doc_concentration
        self.split_merge = split_merge
        self.prior_mean = prior_mean
        self.prior_kappa = prior_kappa
        self.prior_shape = prior_shape
        self.prior_rate = prior_rate
        self.max_iter = max_iter
        self.warmup = warmup
        self.thin = thin
        self.num_chains = num_chains
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.data_parallel = data_parallel
        self.tokenizer = tokenizer
        self.stop_words = stop_words

    # -- data ------------------------------------------------------------------------------
    def _documents(self, X, vocabulary=None) -> list | None:
        """X's documents as token lists (``bnpzoo.corpus.to_documents``: a ``Corpus``, a sparse count
        matrix, texts, gensim's bags of words or token lists), or None for real vectors."""
        X = X.docs if isinstance(X, Corpus) else X
        return to_documents(X, vocabulary, self.tokenizer, self.stop_words)

    def _observations(self, X, groups, vocabulary=None):
        """(x, group of each observation (0..T-1), the sorted group values, vocabulary or None, the
        document of each token (0..D-1 over the documents that have tokens) or None, the documents
        as token lists or None)."""
        if isinstance(X, Corpus):
            groups, X = (X.groups if groups is None else groups), X.docs
        if groups is None:
            raise ValueError("CoupledDP needs groups: one label (an integer or a name) per document (or row)")
        values, group_index = group_labels(groups)
        X = as_sequence(X)
        docs = self._documents(X, vocabulary)
        if docs is not None:
            if len(docs) != len(group_index):
                raise ValueError(f"groups has {len(group_index)} entries for {len(docs)} documents")
            corpus = Corpus("train", docs)
            vocab = corpus.vocabulary()
            if not vocab:
                raise ValueError("the corpus has no tokens")
            doc, word = corpus.token_arrays(vocab)
            lengths = np.bincount(doc)  # documents 0..D-1 over those with tokens (doc is sorted)
            documents = torch.from_numpy(np.repeat(np.arange(np.count_nonzero(lengths)), lengths[lengths > 0]))
            return torch.from_numpy(word), torch.from_numpy(group_index[doc]), values, vocab, documents, docs
        x = check_array(X, dtype=torch.float64)
        if len(group_index) != x.shape[0]:
            raise ValueError(f"groups has {len(group_index)} entries for {x.shape[0]} rows")
        if self.documents:
            raise ValueError("documents=True applies to words (a corpus or token lists), not to real vectors")
        return x, torch.from_numpy(group_index), values, None, None, None

    def _q(self, num_groups):
        if self.q is not None:
            return inheritance_matrix(self.q, num_groups)
        options = {"sigma": float(self.sigma)} if self.config in ("m-ldp", "sngp") else {}
        return inheritance_matrix(self.config, num_groups, **options)

    # -- fitting ---------------------------------------------------------------------------
    @fit_threads
    @keeps_caller_state
    def fit(self, X, groups=None, vocabulary=None):
        """Fit on X, with ``groups`` one label per document (or row), an integer or a name, unless X
        is a ``Corpus`` that has them; ``vocabulary`` names the words of a count matrix or of gensim's bags of words
        (the class docstring); returns self."""
        from bnpzoo.inference.coupled import gibbs  # the sampler (numba, scipy) loads on first use
        from bnpzoo.inference.coupled.kernel import log_joint

        self._validate_params()
        self._forget_fit()
        start = time.perf_counter()
        if self.random_state is not None:
            pyro.set_rng_seed(int(self.random_state))
        group = self._group()
        x, group_index, values, vocab, documents, docs = self._observations(X, groups, vocabulary)
        self.group_values_ = values.tolist()
        self.n_groups_ = len(self.group_values_)
        self.q_ = self._q(self.n_groups_)
        n_tokens = int(x.shape[0])
        device = torch.device("cpu") if self.device is None else self._device_for(X)  # words arrive as lists
        problem = self._problem(x, group_index, vocab, documents, device, group)
        if group is not None:
            problem = self._share(problem, group)
        mcmc, states = self._sample(problem)
        self.mcmc_ = mcmc
        self.samples_ = {name: value.cpu() for name, value in mcmc.get_samples(group_by_chain=True).items()}
        self._check_mixing()
        best = max(states, key=lambda state: float(log_joint(gibbs.resized(problem, state), state)))
        problem = gibbs.resized(problem, best)  # the pool as the best chain's warm-up left it
        self.truncation_ = problem.atoms_per_source
        self._check_pool(problem)
        self._keep(problem, best, vocab)
        self.n_topics_ = int((self.weights_ >= TOPIC_SHARE).sum())
        self.coherence_ = None if vocab is None else self._coherence(docs, X, TOP_WORDS)
        self.n_features_in_ = len(vocab) if vocab is not None else int(x.shape[1])
        self.n_tokens_ = n_tokens
        self.n_iter_ = (self.warmup + self.max_iter) * self.thin
        self.tokens_per_second_ = self.num_chains * self.n_iter_ * self.n_tokens_ / self.sampling_seconds_
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _problem(self, x, group_index, vocab, documents, device, group):
        """The sampler's problem (``gibbs.Problem``): the label step the arguments name or the
        default where the fit runs, checked against the data; words as cells for the blocked step."""
        from bnpzoo.inference.coupled import gibbs

        cells = self.label_step is not None and gibbs.LABEL_STEPS[self.label_step].by_cells
        self.documents_ = (vocab is not None and not cells) if self.documents is None else self.documents
        step = gibbs.label_step(self.label_step, on_device=device.type != "cpu", data_parallel=group is not None,
                                documents=self.documents_ and vocab is not None)
        if device.type != "cpu" and (vocab is None or not step.on_device or group is not None):
            raise ValueError(f"device={self.device!r} fits words in one process, with label_step='uncollapsed' (or "
                             "None); the other label steps and real vectors run on the CPU")
        if group is not None and (vocab is None or not step.spans_ranks or self.num_chains > 1):
            raise ValueError("data_parallel=True fits words, with label_step='approximate', 'parallel' (or None) and "
                             "one chain")
        if self.documents and step.by_cells:
            raise ValueError("documents=True draws labels token by token: use label_step='collapsed'")
        if step.words_only and vocab is None:
            raise ValueError(f"label_step={step.name!r} draws words' labels: it applies to words, not real vectors")
        if vocab is not None and step.by_cells:
            x, group_index, multiplicity = gibbs.cells(x, group_index, len(vocab))
        else:
            multiplicity = None
        x, group_index = x.to(device), group_index.to(device)  # the tokens where the label step runs
        documents = None if documents is None else documents.to(device)
        self.truncation_, self.beta_ = self._truncation(vocab is not None), 0.01 if self.beta is None else self.beta
        problem = gibbs.Problem(
            x=x, groups=group_index, q=self.q_, multiplicity=multiplicity, atoms_per_source=self.truncation_,
            family="gaussian" if vocab is None else "categorical", vocab_size=None if vocab is None else len(vocab),
            beta=float(self.beta_), prior_mean=float(self.prior_mean), prior_kappa=float(self.prior_kappa),
            prior_shape=float(self.prior_shape), prior_rate=float(self.prior_rate),
            alpha=self._alpha(), split_merge_moves=int(self.split_merge),
            documents=documents if self.documents_ else None,
            doc_concentration=None if self.doc_concentration is None else float(self.doc_concentration),
            label_step=step)
        return problem

    def _sample(self, problem):
        """Pyro's MCMC over the chains of the sampler; returns (the MCMC, each chain's final state)."""
        from pyro.infer import MCMC

        from bnpzoo.inference.coupled.kernel import CoupledGibbsKernel, prepare, sampler_cached

        if self.verbose and not sampler_cached():
            print("bnpzoo: compiling the coupled sampler, once (10 to 30 s; later fits load it from numba's cache)",
                  file=sys.stderr, flush=True)
        self.compile_seconds_ = prepare(problem)
        with tempfile.TemporaryDirectory() as folder:
            kernel = CoupledGibbsKernel(problem, thin=self.thin, state_dir=folder, checkpoint=self._checkpoint(problem))
            # chains in worker processes are spawned: a forked worker hangs once torch's thread pool runs;
            # initial_params only tells each chain its index (the kernel draws its own start)
            with warnings.catch_warnings():  # more chains than cores run one after the other, as documented
                warnings.filterwarnings("ignore", message="num_chains=", category=UserWarning)
                mcmc = MCMC(kernel, num_samples=self.max_iter, warmup_steps=self.warmup, num_chains=self.num_chains,
                            initial_params={"chain": torch.arange(self.num_chains).squeeze(0)}, mp_context="spawn",
                            disable_progbar=not self.verbose)
            sampling = time.perf_counter()
            mcmc.run()
            self.sampling_seconds_ = time.perf_counter() - sampling
            states = [torch.load(path, weights_only=False) for path in sorted(Path(folder).glob("*.pt"))]
        return mcmc, states

    def _group(self):
        """The process group of a data-parallel fit (None: one process)."""
        from bnpzoo.inference.data_parallel import world_group

        return world_group() if self.data_parallel else None

    @staticmethod
    def _share(problem, group):
        """This process's share of ``problem``: whole blocks of documents (``parallel.own_blocks``)."""
        from bnpzoo.inference.coupled.parallel import Ranks, own_blocks
        from bnpzoo.inference.data_parallel import rank, size

        blocks = problem.document_blocks
        if len(blocks) - 1 < size(group):
            count = len(blocks) - 1
            raise ValueError(f"the corpus makes {count} block{'s' * (count != 1)} of documents (about 4,096 tokens "
                             f"each), fewer than the {size(group)} processes: fit it in fewer")
        first, lo, hi = own_blocks(blocks, rank(group), size(group))
        tokens = slice(int(problem.document_starts[lo]), int(problem.document_starts[hi]))
        lengths = problem.document_lengths if problem.documents is not None else torch.zeros(0, dtype=torch.int64)
        ranks = Ranks(first_block=first, document_lengths=lengths, group=group)
        documents = None if problem.documents is None else problem.documents[tokens] - lo
        return dataclasses.replace(problem, x=problem.x[tokens], groups=problem.groups[tokens], documents=documents,
                                   ranks=ranks)

    def _checkpoint(self, problem):
        """The chains' checkpoint folder, keyed to the data and every setting a chain's draws depend on."""
        from bnpzoo.inference.checkpoint import chain_checkpoint

        prefix = "chain" if problem.ranks is None else _rank_prefix(problem.ranks.group)
        return chain_checkpoint(self.checkpoint, self.checkpoint_every, self.warmup + self.max_iter, problem, self.thin,
                                self.random_state, prefix=prefix)

    def _alpha(self) -> float | None:
        """alpha for the sampler (None: sampled): the parameter, or 1 with the document level."""
        if self.alpha is None:
            return 1.0 if self.documents_ else None
        return None if self.alpha == "sampled" else float(self.alpha)

    def _truncation(self, words: bool) -> int:
        """L, atoms per latent DP: the parameter, or a pool of about POOL atoms for words (10 each for vectors)."""
        if self.truncation is not None:
            return self.truncation
        return -(-POOL // self.q_.shape[1]) if words else 10

    def _check_pool(self, problem):
        """Warn when some kept sample had data on every atom of the pool: the truncation then
        limits the topics, where a DP would have opened more."""
        pool = problem.sizes[2]
        most = int(self.samples_["atoms_per_source"].sum(-1).max())
        if most >= pool:
            warnings.warn(f"every one of the {pool} atoms held data in some samples (truncation={self.truncation_} "
                          f"atoms for each of {problem.sizes[1]} latent DPs): the truncation may be limiting the "
                          "number of topics; fit again with a larger truncation", UserWarning, stacklevel=3)

    def _check_mixing(self):
        """R-hat of the log joint (NaN with one chain); a warning where it is above 1.1, with the
        sweeps that would give about 100 effective samples at the rate these chains decorrelated
        (``diagnostics.check_mixing``)."""
        self.rhat_ = float("nan")
        if self.num_chains >= 2:
            self.rhat_ = check_mixing(self.samples_, ["log_joint"], self.max_iter * self.thin)["log_joint"]

    def _keep(self, problem, state, vocab):
        """The fitted point summary: the used atoms of one state, largest first."""
        from bnpzoo.inference.coupled import gibbs
        s = problem.sizes[1]
        counts = gibbs.label_counts(problem, state.z)
        sizes = counts.sum(0)
        used = torch.argsort(sizes, descending=True, stable=True)[: int((sizes > 0).sum())]
        self.n_clusters_ = len(used)
        self.weights_ = sizes[used] / sizes.sum()
        self.group_counts_ = counts[:, used]  # each group's tokens on each used atom
        mixing = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, s)[:, used]
        self.group_weights_ = mixing / mixing.sum(1, keepdim=True)  # D_t over the used atoms, renormalised
        self.topic_word_ = gibbs.topic_word(problem, state)[used] if vocab is not None else None
        self.vocabulary_ = vocab
        self.doc_concentration_ = None if problem.documents is None else gibbs.doc_concentration(problem, state)
        self.means_ = None if vocab is not None else state.params["mean"][used]
        self.precisions_ = None if vocab is not None else state.params["precision"][used]

    # -- results ---------------------------------------------------------------------------
    def _check_words(self, what: str) -> None:
        """ValueError unless this model was fitted, on words (``what`` names the method)."""
        self._check_fitted()
        if self.topic_word_ is None:
            raise ValueError(f"{what} applies to word data; this model was fitted on real vectors")

    def _words(self, docs, vocabulary=None, what: str = "this") -> list:
        """``docs`` in any of fit's forms for words, as token lists (refused for a fit on vectors)."""
        self._check_words(what)
        words = self._documents(docs, vocabulary)
        if words is None:
            raise ValueError("docs must be documents: token lists, texts, a sparse count matrix, gensim's bags of "
                             "words or a Corpus")
        numbered = vocabulary is None and not keeps_token_order(docs.docs if isinstance(docs, Corpus) else docs)
        if numbered and any(words) and not (set(self.vocabulary_) & {token for doc in words for token in doc}):
            warnings.warn(f"none of the {what} documents' words (numbered 'w0', 'w1', ... without a vocabulary) is a "
                          "word of the fit, so every document is scored as empty: give the count matrix (or bags of "
                          "words) its vocabulary= as at fit", UserWarning, stacklevel=3)
        return words

    def perplexity(self, docs, vocabulary=None) -> float:
        """Held-out completion perplexity of ``docs`` (any of fit's forms for words;
        ``bnpzoo.perplexity.completion_perplexity``)."""
        from bnpzoo.perplexity import completion_perplexity

        words = self._words(docs, vocabulary, "perplexity")  # first: NotFittedError before a fit
        return completion_perplexity(self.topic_word_, self.vocabulary_, words)

    def transform(self, docs, groups=None, vocabulary=None, topics: str = "listed") -> np.ndarray:
        """Each document's topic proportions, the columns the topics of ``top_words(topics=topics)``
        in its order: the listed topics (``n_topics_``; a row sums to 1 less the document's share on
        the small topics) or ``topics="all"`` (every row of ``topic_word_``; rows sum to 1). The
        topics are held fixed: the model's document level, theta_d ~ DP(b, D), with D the
        document's group's mixture (``group_weights_``, where ``groups`` are given, one fitted group
        value per document) or the corpus's (``weights_``) and b ``doc_concentration_`` (1 without
        the document level), fitted by EM on the document's tokens (``bnpzoo.perplexity.fold_in``:
        theta_k proportional to b D_k + the tokens' responsibilities). ``docs`` in any of fit's forms
        for words; words outside the vocabulary are left out, and a document without known words
        gets D itself."""
        from bnpzoo.perplexity import fold_in

        words = self._words(docs, vocabulary, "transform")
        shown = self._topics_shown(topics)
        base = np.asarray(self.weights_, dtype=np.float64)[None]
        if groups is not None:
            base = np.asarray(self.group_weights_, dtype=np.float64)[self._group_index(groups, len(words), "document")]
        doc_ids, word_ids = Corpus("new", words).token_arrays(self.vocabulary_)
        concentration = self.doc_concentration_ or 1.0
        return fold_in(np.asarray(self.topic_word_, dtype=np.float64), doc_ids, word_ids, len(words),
                       smoothing=concentration * base / base.sum(1, keepdims=True), start=base)[:, :shown]

    def coherence(self, docs, vocabulary=None, top: int = TOP_WORDS) -> np.ndarray:
        """Each listed topic's NPMI coherence (``bnpzoo.coherence``) over a reference corpus ``docs``
        in any of fit's forms for words (``coherence_`` is this over the training documents): its
        ``top`` top words, windows of 10 tokens, or whole documents for a count matrix or bags of
        words, whose token order is lost."""
        return self._coherence(self._words(docs, vocabulary, "coherence"), docs, top)

    def _coherence(self, words: list, docs, top: int) -> np.ndarray:
        """``coherence`` over ``words``, the token lists of ``docs`` (whose form sets the windows)."""
        window = WINDOW if keeps_token_order(docs.docs if isinstance(docs, Corpus) else docs) else None
        return npmi_coherence(self.top_words(top), words, window)

    def top_words(self, n: int = 10, topics: str = "listed") -> list[list[str]]:
        """The ``n`` most probable words of each topic, largest topic first: the topics listed
        (``n_topics_``, those holding at least ``TOPIC_SHARE`` of the tokens) or ``topics="all"``
        (every atom that holds data, the rows of ``topic_word_``)."""
        self._check_words("top_words")
        rows = np.asarray(self.topic_word_)[: self._topics_shown(topics)]
        return [[self.vocabulary_[j] for j in np.argsort(-row, kind="stable")[:n]] for row in rows]

    def _topics_shown(self, topics: str) -> int | None:
        """How many of the topics (largest first) ``topics`` names: "listed" (``n_topics_``) or "all"."""
        if topics not in ("listed", "all"):
            raise ValueError(f"topics must be 'listed' (the topics holding at least {TOPIC_SHARE:.0%} of the tokens) "
                             f"or 'all', got {topics!r}")
        return self.n_topics_ if topics == "listed" else None

    def plot_prevalence(self, path=None, ax=None, words: int = 3):
        """A heatmap of each group's share of its tokens on each listed topic (``group_counts_`` in
        the kept state, over all of the group's tokens: a row sums to 1 less its share on the tail
        of small topics), groups in their sorted order (years read top to bottom), each topic
        labelled by its ``words`` top words. Saved to ``path`` when given; returns the figure (drawn
        through pyplot where the session has loaded it, so that a notebook shows it, else outside it:
        ``bnpzoo.plots.new_figure``)."""
        from bnpzoo.plots import prevalence_figure

        self._check_words("plot_prevalence")
        counts = np.asarray(self.group_counts_, dtype=np.float64)
        shares = counts[:, : self.n_topics_] / np.maximum(counts.sum(1, keepdims=True), 1)
        labels = [" ".join(top) for top in self.top_words(words)]
        return prevalence_figure(shares, labels, self.group_values_, path=path, ax=ax)

    def to_arviz(self):
        """The chains' summaries as ArviZ InferenceData (``arviz.from_pyro``), for R-hat and ESS."""
        if not hasattr(self, "mcmc_"):
            raise ValueError("to_arviz needs the MCMC run of this session's fit (it is not saved)")
        return arviz().from_pyro(self.mcmc_)

    def fit_predict(self, X, groups=None) -> np.ndarray:
        """Real vectors only: fit, then ``predict`` on the training rows."""
        return self.fit(X, groups).predict(X, groups)

    def predict(self, X, groups):
        """Real vectors only: the MAP atom of each row under its group's mixture,
        argmax_k D_t(k) N(x; mean_k, 1 / precision_k), indices into ``means_``."""
        from bnpzoo.inference.coupled import gibbs

        self._check_fitted()
        if self.means_ is None:
            raise ValueError("predict applies to real vectors; for words use topic_word_ and perplexity()")
        x = self._rows(X, fitting=False, dtype=torch.float64, n_features=self.n_features_in_)
        index = self._group_index(groups, x.shape[0], "row")
        fitted = {"mean": self._fitted("means_"), "precision": self._fitted("precisions_")}
        density = gibbs.gaussian_log_density(x, fitted)
        return (self._fitted("group_weights_").log()[index] + density).argmax(1).cpu().numpy()

    def _group_index(self, groups, n: int, of: str) -> np.ndarray:
        """Each of ``n`` documents' (rows') fitted group, 0..T-1, from its group value."""
        index, unseen = fitted_positions(self.group_values_, groups)
        if len(index) != n or unseen is not None:
            raise ValueError(f"groups must hold one of the fitted groups {self.group_values_} for each {of}"
                             + (f" ({unseen!r} is not one)" if unseen is not None else ""))
        return index
