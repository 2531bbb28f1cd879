"""Every tutorial (jupytext percent source) executes top to bottom."""

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).parents[1] / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_executes(path, tmp_path):
    notebook = jupytext.read(path)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [out for cell in notebook.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
