"""``bnpzoo`` / ``python -m bnpzoo``: fit one model, or compare every model x learner on a data set.

    bnpzoo fit MODEL --data DATA [--inference LEARNER] [--labels PATH] [--groups PATH] [--test-data PATH]
                     [--truncation K] [--iters N] [--batch-size M] [--seed S] [--device D] [model options] [--json]
                     [--save PATH] [--labels-out PATH]
    bnpzoo compare --data DATA [--out DIR] [--json]

Bad input or arguments: exit status 2 and one line on stderr, no traceback.

Started by ``torchrun --nproc-per-node P -m bnpzoo fit ...``, ``fit`` runs data-parallel
(``inference.data_parallel``): each process fits its share of the rows (mapped, for a ``.npy``
file), or for ``coupled-dp`` reads the whole corpus and sweeps its share of the documents, and
rank 0 prints the results, scored on every row.
"""

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from bnpzoo import data as datasets
from bnpzoo.base import ConvergenceWarning
from bnpzoo.corpus import Corpus, read_corpus
from bnpzoo.coupled_dp import TOP_WORDS, TOPIC_SHARE
from bnpzoo.diagnostics import RHAT_LIMIT
from bnpzoo.docstrings import first_sentence
from bnpzoo.inference import data_parallel
from bnpzoo.metrics import acc, clusters_used, nmi
from bnpzoo.models import PROGRAMS, copy_program
from bnpzoo.registry import MODELS


class UsageError(ValueError):
    """A bad command line: printed as it is when it names the command (argparse's), else after "bnpzoo: error:"."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one line, exit 2."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _common(parser: Parser, model: str | None = None):
    """The flags of every command; with ``model``, the shared ones described by that model's entries."""
    def shared(parameter, generic):
        return MODELS[model].help_for(parameter, generic) if model else generic

    parser.add_argument("--data", required=True,
                        help="a shipped data set (digits, digits-bags, blobs, topics; options after a colon, such "
                             "as blobs:n=5000,d=8,k=4,seed=1 or topics:n=200,groups=4,topics=10,vocab=500,length=80) "
                             "or a file: .csv, .npy (numbers) or .txt (one document a line)")
    parser.add_argument("--labels", help="file of integer labels, one a line, aligned with the rows")
    parser.add_argument("--groups", help="file of group labels (integers or names), one a line, aligned with the "
                        "documents (coupled-dp) or rows (hdp-gd)")
    parser.add_argument("--test-data", help="held-out corpus (topic models only)")
    parser.add_argument("--truncation", type=int, help=shared("truncation", "truncation level K"))
    parser.add_argument("--iters", type=int, help=shared("max_iter", "maximum iterations"))
    parser.add_argument("--batch-size", type=int, help=shared("batch_size", "minibatch size (stochastic learners)"))
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of results")
    parser.add_argument("--save", metavar="PATH", help="write the fitted model to the file PATH (fit only; read it "
                        "with the estimator's load)")
    parser.add_argument("--labels-out", metavar="PATH", help="write each row's cluster to the file PATH, one integer "
                        "a line, aligned with the rows (fit only)")
    parser.add_argument("--verbose", action="store_true", help="progress bar")


def build_parser() -> Parser:
    parser = Parser(prog="bnpzoo", description="Bayesian nonparametric mixtures as Pyro programs.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    epilog = "\n".join(f"{name} (learners: {', '.join(entry.learners)}) options: "
                        + " ".join(flag for flag, _, _ in entry.options()) for name, entry in MODELS.items())
    fit = sub.add_parser("fit", help="fit one model with one learner",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         epilog=epilog + "\n\nbnpzoo fit MODEL --help describes a model's options.")
    _fit_arguments(fit)
    compare = sub.add_parser("compare", help="every model x learner on one data set: a table and a figure")
    _common(compare)
    compare.add_argument("--out", default="results", help="folder for the figure (default: results)")
    new = sub.add_parser("new-model", help="write a model's Pyro program to a file of your own, to edit and fit")
    new.add_argument("model", choices=list(PROGRAMS))
    new.add_argument("path", help="the new file, for example my_model.py")
    return parser


def model_parser(model: str) -> Parser:
    """``bnpzoo fit MODEL``'s own parser, for its --help: the common flags and the model's options,
    each described by its docstring (``MODELS[model].options``)."""
    entry = MODELS[model]
    parser = Parser(prog=f"bnpzoo fit {model}", description=f"Fit {entry.estimator.__name__}: "
                    f"{first_sentence(entry.estimator.__doc__.strip())} Learners: {', '.join(entry.learners)}.")
    _fit_arguments(parser, model)
    options = parser.add_argument_group(f"{model} options")
    for flag, _, kwargs in entry.options():
        options.add_argument(flag, **kwargs)
    return parser


def _fit_arguments(parser: Parser, model: str | None = None) -> None:
    """``bnpzoo fit``'s arguments; ``model``: its own parser (``model_parser``), the model given."""
    if model is None:
        parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--inference", help="learner name (default: the model's own; " +
                        ", ".join(f"{name}: {entry.default_learner}" for name, entry in MODELS.items()
                                  if model in (None, name)) + ")")
    _common(parser, model)
    parser.add_argument("--plot", metavar="PATH", help="coupled-dp: draw the topics' prevalence by group to the PNG "
                        "file PATH")


def cmd_new_model(args, extra) -> None:
    if extra:
        raise UsageError(f"bnpzoo new-model takes a model and a path, not {' '.join(extra)}")
    path = copy_program(args.model, args.path)
    refit = PROGRAMS[args.model][1]
    print(f"wrote {path} (bnpzoo.models.{PROGRAMS[args.model][0]}); edit it, then in Python, beside it:\n"
          f"    import {path.stem} as my_model\n    from bnpzoo import {refit.split('(')[0]}\n    {refit}"
          if refit else f"wrote {path}: a program to read, draw from and edit; bnpzoo's learner for {args.model} "
          "is derived for the shipped program, so an edited copy is not fitted by bnpzoo")


def _model_options(model: str, argv: list) -> dict:
    parser = Parser(prog=f"bnpzoo fit {model}", add_help=False)
    for flag, _, kwargs in MODELS[model].options():
        parser.add_argument(flag, **kwargs)
    return {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}


def _load(args, model: str | None):
    """The data (checked in full, corpora included) and the held-out corpus, if any. ``model``
    None: the numeric data of ``bnpzoo compare``."""
    entry = MODELS[model] if model else None
    grouped = entry is not None and entry.grouped
    if entry is not None and args.groups and not (grouped or entry.needs_groups):
        takers = [name for name, e in MODELS.items() if e.grouped or e.needs_groups]
        raise UsageError(f"{model} takes no groups: --groups applies to {' and '.join(takers)}")
    dataset = datasets.load(args.data, labels=args.labels, groups=args.groups, as_corpus=grouped)
    held_out = read_corpus(args.test_data) if args.test_data else None
    if grouped != isinstance(dataset, Corpus):
        raise UsageError(f"{dataset.name} is a corpus, for the grouped topic model coupled-dp" if not grouped
                         else f"coupled-dp fits a grouped corpus (.txt with --groups, a count matrix with --groups, "
                              f"or digits-bags), not {dataset.name}")
    if (grouped or (entry is not None and entry.needs_groups)) and dataset.groups is None:
        raise UsageError(f"{model} needs groups for {dataset.name}: give --groups, one label (an integer or a "
                         f"name) per {'document' if grouped else 'row'}")
    if not grouped and held_out is not None:
        raise UsageError("--test-data (a held-out corpus) applies to the topic model coupled-dp")
    return dataset, held_out


def _estimator(model: str, inference: str, args, options: dict, group=None):
    entry = MODELS[model]
    if inference not in entry.learners:
        raise UsageError(f"--inference {inference!r} does not apply to {model}: use one of {', '.join(entry.learners)}")
    params = dict(options, inference=inference, random_state=args.seed, verbose=args.verbose)
    accepted = entry.estimator._param_names()
    if group is not None:
        if "data_parallel" not in accepted:
            raise UsageError(f"{model} fits in one process: start it without torchrun")
        params["data_parallel"] = True
    flags = (("truncation", "truncation"), ("iters", "max_iter"), ("batch_size", "batch_size"), ("device", "device"))
    for flag, name in flags:
        if getattr(args, flag) is not None:
            if name not in accepted:
                raise UsageError(f"--{flag.replace('_', '-')} does not apply to {model}")
            params[name] = getattr(args, flag)
    return entry.estimator(**params)


def run_grouped(model: str, inference: str, corpus, held_out, args, options: dict, group=None) -> dict:
    """Fit a grouped topic model; its JSON record, with perplexity on the held-out corpus. ``group``:
    the process group of a data-parallel fit (every process reads the whole corpus and sweeps its
    share of the documents)."""
    est = _estimator(model, inference, args, options, group).fit(corpus)
    return {
        "model": model, "inference": inference, "data": corpus.name, "n": est.n_tokens_, "d": est.n_features_in_,
        "truncation": est.truncation_, "k_used": est.n_topics_, "n_topics": est.n_topics_,
        "atoms_used": est.n_clusters_,
        "coherence": _rounded(np.mean(est.coherence_)) if est.coherence_ is not None and len(est.coherence_) else None,
        "topic_coherence": None if est.coherence_ is None else [_rounded(c) for c in est.coherence_],
        "nmi": None, "nmi_arithmetic": None, "acc": None,
        "perplexity": None if held_out is None else round(est.perplexity(held_out), 2),
        "seconds": round(est.fit_seconds_, 4), "iterations": est.n_iter_, "elbo": None,
        "log_joint": float(est.samples_["log_joint"][:, -1].max()),
        "rhat": round(est.rhat_, 4) if np.isfinite(est.rhat_) else None,
        "tokens_per_second": round(est.tokens_per_second_), "device": args.device or "cpu", "dtype": "float64",
        "processes": data_parallel.size(group), "_estimator": est,
    }


def _rounded(value) -> float:
    return round(float(value), 4)


def run_one(model: str, inference: str, dataset, args, options: dict, group=None) -> dict:
    """Fit and score one model x learner; returns the JSON record of DESIGN.md. ``group``: the
    process group of a data-parallel fit, in which this process fits and labels its share of the
    rows, and the labels of all of them are scored."""
    groups = (dataset.groups,) if MODELS[model].needs_groups else ()
    est = _estimator(model, inference, args, options, group)
    X = dataset.X if group is None else data_parallel.rank_rows(dataset.X)
    with warnings.catch_warnings():  # said below in the CLI's words
        warnings.filterwarnings("ignore", ".*stopped after", ConvergenceWarning)
        warnings.filterwarnings("ignore", ".*chains have not mixed", ConvergenceWarning)
        est.fit(X, *groups)
    if not est.converged_ and data_parallel.rank(group) == 0:
        limit = f"--iters {est.max_iter}" if est.max_iter else "its default iterations"
        rhat = getattr(est, "rhat_", None)  # a sampler's: its chains' R-hat of each summary
        test = "its convergence test passed" if rhat is None else \
            f"its chains mixed (R-hat {max(rhat.values()):.2f} above {RHAT_LIMIT})"
        print(f"bnpzoo: warning: the fit reached {limit} before {test}; raise --iters to let it finish",
              file=sys.stderr)
    pred = data_parallel.gather_rows(torch.as_tensor(est.predict(X, *groups)), group).numpy()
    extra = {"saliency": [round(float(s), 4) for s in est.saliency_]} if hasattr(est, "saliency_") else {}
    return {
        "model": model, "inference": inference, **_scores(dataset, pred),
        "truncation": est.truncation, "perplexity": None, "seconds": round(est.fit_seconds_, 4),
        "iterations": est.n_iter_, "converged": bool(est.converged_), "elbo": est.elbo_trace_[-1],
        "device": args.device or "cpu",
        "dtype": _fitted_dtype(est), "processes": data_parallel.size(group), **extra,
        "_estimator": est, "_labels": pred,
    }


def _fitted_dtype(est) -> str:
    """The precision the fit ran in: the ``dtype`` asked for, or float64 where the data sat too far
    from zero for float32 (``check_array(widen=True)``)."""
    means = getattr(est, "means_", None)
    return str(est._dtype if means is None else means.dtype).removeprefix("torch.")


def _scores(dataset, pred) -> dict:
    """The data's fields of a record and the partition's scores against its labels, if any."""
    labels = dataset.labels
    return {"data": dataset.name, "n": int(dataset.X.shape[0]), "d": int(dataset.X.shape[1]),
            "k_used": clusters_used(pred), "nmi": None if labels is None else round(nmi(labels, pred), 4),
            "nmi_arithmetic": None if labels is None else round(nmi(labels, pred, "arithmetic"), 4),
            "acc": None if labels is None else round(acc(labels, pred), 4)}


def _public(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith("_")}


def _json_line(value) -> str:
    """Strict JSON: a NaN or infinite number becomes null, and stderr says which fields."""
    replaced = []

    def finite(item, path):
        if isinstance(item, dict):
            return {k: finite(v, f"{path}.{k}" if path else k) for k, v in item.items()}
        if isinstance(item, list):
            return [finite(v, f"{path}[{i}]") for i, v in enumerate(item)]
        if isinstance(item, float) and not np.isfinite(item):
            replaced.append(path)
            return None
        return item

    line = json.dumps(finite(value, ""), allow_nan=False)
    if replaced:
        print(f"bnpzoo: warning: non-finite values written as null: {', '.join(replaced)}", file=sys.stderr)
    return line


def _table(records: list) -> str:
    cols = ["model", "inference", "k_used", "nmi", "nmi_arithmetic", "acc", "seconds", "iterations", "elbo"]
    heads = {"nmi": "nmi(max)", "nmi_arithmetic": "nmi(arith)"}
    fmt = lambda v: "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
    rows = [[heads.get(c, c) for c in cols]] + [[fmt(r[c]) for c in cols] for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


def _topics(record: dict, shown: int = 10, words: int = 8) -> str:
    """A topic model's fit for a reader: its numbers, then the largest topics' top words."""
    est = record["_estimator"]
    numbers = [f"{record['k_used']} topics (of {record['atoms_used']} holding tokens, those with at least "
               f"{TOPIC_SHARE:.0%} of them)", f"{record['n']:,} tokens", f"{record['seconds']:.1f} s",
               f"{record['tokens_per_second']:,} tokens/s", f"document level {'on' if est.documents_ else 'off'}"]
    if record["coherence"] is not None:
        numbers.insert(1, f"coherence (NPMI, top {TOP_WORDS} words) {record['coherence']:.3f}")
    if record["perplexity"] is not None:
        numbers.insert(1, f"held-out perplexity {record['perplexity']:.1f}")
    if record["rhat"] is not None:
        numbers.append(f"R-hat {record['rhat']:.3f}")
    lines = [f"bnpzoo coupled-dp on {record['data']}: " + ", ".join(numbers)]
    if est.topic_word_ is not None:
        for k, top in enumerate(est.top_words(words)[:shown]):
            lines.append(f"topic {k:2d} ({float(est.weights_[k]):5.1%}, NPMI {est.coherence_[k]:+.2f}): "
                         + " ".join(top))
        if est.n_topics_ > shown:
            lines.append(f"... and {est.n_topics_ - shown} smaller topics")
    return "\n".join(lines)


def _writable(folder: Path, option: str) -> None:
    """Check, before any fit, that ``folder`` exists or can be made, and takes a file."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise UsageError(f"{option} {folder}: cannot write there ({err.strerror or err})") from None


def _writable_file(path: str, option: str) -> None:
    """Check, before any fit, that ``path`` names a file (not a folder) in a folder that takes one."""
    if Path(path).is_dir():
        raise UsageError(f"{option} {path}: that is a folder; give a file's path, such as {Path(path) / 'out'}")
    _writable(Path(path).parent, option)


def cmd_fit(args, extra) -> None:
    options = _model_options(args.model, extra)
    for option, path in (("--save", args.save), ("--labels-out", args.labels_out)):
        if path:
            _writable_file(path, option)
    if args.labels_out and MODELS[args.model].grouped:
        raise UsageError(f"--labels-out writes each row's cluster: {args.model} clusters documents' words, not rows")
    if args.plot:
        if not MODELS[args.model].grouped:
            raise UsageError(f"--plot draws a topic model's prevalence by group; for {args.model} use bnpzoo compare")
        _writable_file(args.plot, "--plot")
    args.inference = args.inference or MODELS[args.model].default_learner
    group = data_parallel.world_group(args.device) if data_parallel.launched() else None
    if group is not None and args.device is not None:  # --device cuda: each process its own GPU
        args.device = str(data_parallel.rank_device(args.device))
    dataset, held_out = _load(args, args.model)
    record = (run_grouped(args.model, args.inference, dataset, held_out, args, options, group)
              if MODELS[args.model].grouped
              else run_one(args.model, args.inference, dataset, args, options, group))
    if data_parallel.rank(group) != 0:
        return
    if args.save:
        record["_estimator"].save(args.save)
        print(f"bnpzoo: wrote the fitted model to {args.save}", file=sys.stderr)
    if args.labels_out:
        np.savetxt(args.labels_out, record["_labels"], fmt="%d")
        print(f"bnpzoo: wrote {len(record['_labels']):,} rows' clusters to {args.labels_out}", file=sys.stderr)
    if args.plot:
        from bnpzoo.plots import close

        close(record["_estimator"].plot_prevalence(args.plot))
        print(f"bnpzoo: wrote the prevalence figure to {args.plot}", file=sys.stderr)
    if args.json:
        print(_json_line(_public(record)))
    elif MODELS[args.model].grouped:
        print(_topics(record))
    else:
        print(_table([record]))


def reference_bgm(dataset, args) -> dict | None:
    """scikit-learn's BayesianGaussianMixture (diagonal covariances, DP weights, as many components
    as our truncation) as a reference row, when scikit-learn is installed."""
    try:
        from sklearn.mixture import BayesianGaussianMixture
    except ImportError:
        return None
    import time

    from sklearn.exceptions import ConvergenceWarning as BGMConvergenceWarning

    start = time.perf_counter()
    bgm = BayesianGaussianMixture(n_components=args.truncation or 50, covariance_type="diag",
                                  weight_concentration_prior_type="dirichlet_process", max_iter=args.iters or 100,
                                  random_state=args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BGMConvergenceWarning)
        pred = bgm.fit(dataset.X).predict(dataset.X)
    return {"model": "sklearn-bgm", "inference": "diag", **_scores(dataset, pred), "truncation": bgm.n_components,
            "perplexity": None, "seconds": round(time.perf_counter() - start, 4), "iterations": int(bgm.n_iter_),
            "elbo": None, "device": "cpu", "dtype": str(bgm.means_.dtype), "_estimator": bgm}


def cmd_compare(args, extra) -> None:
    if data_parallel.launched():
        raise UsageError("bnpzoo compare runs in one process: start it without torchrun")
    if extra:
        raise UsageError(f"bnpzoo compare: unrecognized arguments: {' '.join(extra)}")
    for option, given in (("--save", args.save), ("--labels-out", args.labels_out)):
        if given:
            raise UsageError(f"bnpzoo compare fits many models: {option} applies to bnpzoo fit")
    out = Path(args.out)
    _writable(out, "--out")
    dataset, _ = _load(args, None)
    # hdp-gd rows where the data has groups (its proportions are checked by the fit)
    runs = [(model, learner) for model, entry in MODELS.items()
            if not entry.grouped and (dataset.groups is not None or not entry.needs_groups)
            for learner in (entry.compared or entry.learners)]
    fits = [lambda model=model, learner=learner: run_one(model, learner, dataset, args, {}) for model, learner in runs]
    records = []
    for i, fit in enumerate(fits + [lambda: reference_bgm(dataset, args)], 1):
        record = fit()
        if record is not None:  # the reference row: None without scikit-learn
            records.append(record)
            print(f"[{i}/{len(fits) + 1}] {record['model']} / {record['inference']}: {record['seconds']:.2f} s",
                  file=sys.stderr)
    print(f"bnpzoo compare on {dataset.name}: n={dataset.X.shape[0]}, d={dataset.X.shape[1]}")
    print(_table(records))
    from bnpzoo.plots import comparison_figure

    figure = out / f"compare-{dataset.name.split(':')[0]}.png"
    comparison_figure(records, dataset, figure)
    print(f"figure: {figure}")
    if args.json:
        print(_json_line([_public(r) for r in records]))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["fit"] and {"-h", "--help"} & set(argv) and set(argv) & set(MODELS):
            model_parser(next(arg for arg in argv if arg in MODELS)).print_help()
            return 0
        args, extra = build_parser().parse_known_args(argv)
        {"fit": cmd_fit, "compare": cmd_compare, "new-model": cmd_new_model}[args.command](args, extra)
    except (ValueError, OSError, FloatingPointError) as err:
        named = isinstance(err, UsageError) and str(err).startswith("bnpzoo")
        print(str(err) if named else f"bnpzoo: error: {err}", file=sys.stderr)
        return 2
    finally:
        data_parallel.close_own_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
