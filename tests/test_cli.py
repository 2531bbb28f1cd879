"""Every CLI command runs; bad input exits 2 with one line on stderr."""

import json
import subprocess
import sys
from contextlib import nullcontext

import numpy as np
import pytest

from bnpzoo.cli import main

FIELDS = {"model", "inference", "data", "n", "d", "truncation", "k_used", "nmi", "acc", "perplexity",
          "seconds", "iterations", "elbo", "device", "dtype"}


def test_fit_json_line_has_the_design_fields(capsys):
    assert main(["fit", "dp-gmm", "--inference", "vmm", "--data", "digits", "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert FIELDS <= record.keys()
    assert record["n"] == 1797 and record["d"] == 64 and record["perplexity"] is None
    assert 0 <= record["nmi"] <= 1 and record["k_used"] >= 1


@pytest.mark.parametrize("iters, converged", [(["--iters", "2"], False), ([], True)], ids=["stopped", "default"])
def test_a_fit_stopped_by_iters_says_so_in_the_cli_s_words(iters, converged, capsys):
    assert main(["fit", "dp-gmm", "--data", "blobs:n=300,d=2,k=3", *iters, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["converged"] is converged
    assert ("bnpzoo: warning: the fit reached --iters 2 before" in err) is not converged and "Traceback" not in err


@pytest.mark.parametrize("offset, options, dtype", [(0.0, [], "float32"), (0.0, ["--dtype", "float64"], "float64"),
                                                    (1e5, [], "float64")], ids=["default", "asked", "widened"])
def test_the_json_line_names_the_precision_the_fit_ran_in(offset, options, dtype, tmp_path, capsys):
    """Data 1e5 from zero (1e4 spreads) is fitted in float64 whatever was asked (``check_array(widen=True)``)."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.normal(size=(200, 2)) + rng.integers(0, 3, size=(200, 1)) * 10 + offset)
    with pytest.warns(UserWarning, match="float64") if offset else nullcontext():
        assert main(["fit", "dp-gmm", "--data", str(tmp_path / "x.npy"), *options, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["dtype"] == dtype


@pytest.mark.parametrize("model, learner", [("dp-gmm", "vmm"), ("pyp-ggm", "svmm")])
def test_fit_without_inference_runs_the_estimators_default_learner(model, learner, capsys):
    assert main(["fit", model, "--data", "blobs:n=300,d=2,k=3", "--iters", "20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["inference"] == learner


def test_help_starts_without_the_heavy_modules():
    code = ("import sys; from bnpzoo.cli import build_parser; build_parser().format_help(); "
            "print(sorted(m for m in ('arviz', 'numba', 'matplotlib', 'scipy.stats', 'sklearn') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_fit_on_a_csv_with_labels_and_model_options(tmp_path, capsys, model_draw):
    X, z, _ = model_draw
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    np.savetxt(tmp_path / "y.txt", z, fmt="%d")
    argv = ["fit", "dp-gmm", "--inference", "vi", "--data", str(tmp_path / "x.csv"), "--labels",
            str(tmp_path / "y.txt"), "--truncation", "12", "--iters", "200", "--guide", "map", "--json"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["truncation"] == 12 and record["nmi"] > 0.95


def test_fit_with_a_stochastic_learner_and_its_options(capsys):
    argv = ["fit", "dp-gmm", "--inference", "sga-fisher", "--data", "blobs:n=3000,d=4,k=5",  # labels built in
            "--batch-size", "300", "--learning-rate", "0.2", "--iters", "200", "--json"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["inference"] == "sga-fisher" and record["nmi"] > 0.95 and record["k_used"] == 5


def test_compare_prints_a_table_and_writes_a_figure(tmp_path, capsys, monkeypatch):
    import bnpzoo.plots

    figures, draw = [], bnpzoo.plots.comparison_figure
    monkeypatch.setattr(bnpzoo.plots, "comparison_figure", lambda *args: figures.append(draw(*args)))
    assert main(["compare", "--data", "blobs:n=400,d=2,k=3", "--iters", "100", "--out", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert "vmm" in captured.out and "vi" in captured.out and "sklearn-bgm" in captured.out  # the reference row
    progress = [line for line in captured.err.splitlines() if line.startswith("[")]
    records = json.loads(captured.out.strip().splitlines()[-1])
    assert len(progress) == len(records) == captured.out.count("\n") - 4  # rows: minus title, header, figure, JSON
    assert all(FIELDS <= record.keys() for record in records)
    assert (tmp_path / "compare-blobs.png").stat().st_size > 10_000
    # the figure's legend counts the clusters as the table does (BGM keeps weight on unused ones)
    legend = [text.get_text() for text in figures[0].axes[2].get_legend().get_texts()]
    assert [f"{r['k_used']} clusters used" in line for r, line in zip(records, legend)] == [True] * len(records)


def test_fit_writes_each_rows_cluster(tmp_path, capsys):
    out = tmp_path / "clusters.txt"
    assert main(["fit", "dp-gmm", "--data", "blobs:n=300,d=2,k=3", "--labels-out", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    labels = np.loadtxt(out, dtype=int)
    assert labels.shape == (300,) and len(np.unique(labels)) == record["k_used"] == 3
    from bnpzoo.data import load
    from bnpzoo.metrics import nmi

    assert nmi(load("blobs:n=300,d=2,k=3").labels, labels) == pytest.approx(record["nmi"], abs=1e-4)


@pytest.mark.parametrize("argv, message", [
    (["fit", "dp-gmm", "--inference", "vmm", "--data", "digits", "--scale", "0"], "scale"),
    (["fit", "dp-gmm", "--inference", "vmm", "--data", "digits", "--truncation", "0"], "truncation"),
    (["fit", "dp-gmm", "--inference", "online-vi", "--data", "digits"], "inference"),
    (["fit", "dp-gmm", "--inference", "vmm", "--data", "missing.csv"], "does not exist"),
    (["fit", "dp-gmm", "--inference", "vmm", "--data", "digits", "--bogus", "1"], "unrecognized"),
    (["fit", "no-such-model", "--inference", "vmm", "--data", "digits"], "invalid choice"),
    (["fit", "dp-gmm", "--data", "hdp-gd", "--groups", "g.txt"], "dp-gmm takes no groups: --groups applies to hdp-gd"),
    (["compare", "--data", "blobs:n=100", "--out", "/proc/none"], "--out /proc/none: cannot write there"),
    (["fit", "dp-gmm", "--data", "blobs:n=100", "--save", "/proc/none/m.pt"], "--save /proc/none: cannot write"),
    (["fit", "dp-gmm", "--data", "blobs:n=100", "--save", "/tmp"], "--save /tmp: that is a folder"),
    (["fit", "dp-gmm", "--data", "blobs:n=100", "--labels-out", "/tmp"], "--labels-out /tmp: that is a folder"),
    (["compare", "--data", "blobs:n=100", "--labels-out", "c.txt"], "--labels-out applies to bnpzoo fit"),
])
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]  # one line: no fit ran first (compare reports each)


def test_nan_in_a_csv_exits_2_through_the_installed_entry_point(tmp_path):
    (tmp_path / "x.csv").write_text("1,2\nnan,4\n")
    proc = subprocess.run([sys.executable, "-m", "bnpzoo", "fit", "dp-gmm", "--inference", "vmm", "--data",
                           str(tmp_path / "x.csv")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"bnpzoo: error: data file {tmp_path / 'x.csv'}: line 2, column 1 is "
                                                "'nan', not a finite number (a missing value: fill or drop it)"]
