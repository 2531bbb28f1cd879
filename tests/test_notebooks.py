"""The notebooks users open (``tutorials/*.ipynb``) are their jupytext sources, cell for cell
(``docs/notebooks.py`` writes them), and every tutorial executes top to bottom as ``make notebooks``
runs it (``notebooks.execute``: in a scratch folder, where 07 writes its program)."""

import importlib.util
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location("notebooks", Path(__file__).parents[1] / "docs" / "notebooks.py")
notebooks = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(notebooks)


@pytest.mark.parametrize("source", notebooks.TUTORIALS, ids=lambda p: p.stem)
def test_each_notebook_matches_its_source(source):
    written = source.with_suffix(".ipynb")
    assert written.exists(), f"{written.name} is missing: run python docs/notebooks.py"
    assert written.read_text() == notebooks.notebook_text(source), \
        f"{written.name} differs from {source.name}: run python docs/notebooks.py"


def test_every_notebook_has_a_source():
    sources = {p.stem for p in notebooks.TUTORIALS}
    assert {p.stem for p in (Path(__file__).parents[1] / "tutorials").glob("[0-9]*.ipynb")} <= sources


@pytest.mark.parametrize("source", notebooks.TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_executes(source):
    notebook, _ = notebooks.execute(source)
    errors = [out for cell in notebook.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
