"""Progress bars: tqdm's notebook widget where Jupyter can draw it, its text bar elsewhere.

``tqdm.auto`` picks the widget in any Jupyter kernel and, where ipywidgets is missing, warns
``TqdmWarning: IProgress not found`` when it is imported (Pyro imports it) and draws nothing; here
the text bar is taken instead, and Pyro is imported with that one warning silenced, the caller's
warning filters untouched."""

import contextlib
import importlib.util
import sys
import warnings

from tqdm import tqdm as text_bar


def widgets() -> bool:
    """Whether this process is a Jupyter kernel that can draw tqdm's widget (ipywidgets installed)."""
    ipython = sys.modules.get("IPython")  # a kernel has imported it; nothing else needs to
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in shell.config and importlib.util.find_spec("ipywidgets") is not None


def tqdm(*args, **kwargs):
    """A progress bar (tqdm's arguments): the notebook widget where ``widgets()``, else text."""
    if widgets():
        from tqdm.notebook import tqdm as widget_bar

        return widget_bar(*args, **kwargs)
    return text_bar(*args, **kwargs)


def finish(bar) -> None:
    """Close ``bar`` at what the fit did: a fit that converged at step 4 of 500 ends at 4/4, not 4/500."""
    if bar.n < (bar.total or 0):
        bar.total = bar.n
        bar.refresh()
    bar.close()


@contextlib.contextmanager
def progress(**kwargs):
    """``with progress(total=..., ...) as bar``: a ``tqdm`` bar that ends at what was done (``finish``)."""
    bar = tqdm(**kwargs)
    try:
        yield bar
    finally:
        finish(bar)


def quietly_import_pyro() -> None:
    """Import Pyro (its MCMC logger imports ``tqdm.auto``) without tqdm's IProgress warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import pyro  # noqa: F401
