"""The README's quickstart runs as written (the tutorials execute in ``test_notebooks.py``)."""

from pathlib import Path


def test_the_readme_quickstart_runs_as_written(tmp_path, monkeypatch):
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)  # it saves a file
    exec(compile(quickstart, "README quickstart", "exec"), {})
    assert (tmp_path / "digits.pt").exists()
