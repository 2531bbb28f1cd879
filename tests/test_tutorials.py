"""Every tutorial (jupytext percent source) executes top to bottom, and so does the README's quickstart."""

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).parents[1] / "tutorials").glob("[0-9]*.py"))  # not the files a tutorial writes


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_executes(path, tmp_path):
    notebook = jupytext.read(path)
    folder = {"metadata": {"path": str(tmp_path)}}  # the tutorials' own files (07 writes its program) go here
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources=folder).execute()
    errors = [out for cell in notebook.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors


def test_the_readme_quickstart_runs_as_written(tmp_path, monkeypatch):
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)  # it saves a file
    exec(compile(quickstart, "README quickstart", "exec"), {})
    assert (tmp_path / "digits.pt").exists()
