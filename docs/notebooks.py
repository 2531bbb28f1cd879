"""The tutorials as notebooks, from their jupytext sources (``tutorials/*.py``, the one truth).

    python docs/notebooks.py            write tutorials/NAME.ipynb (no outputs), the notebooks a
                                        user opens in Jupyter; tests/test_notebooks.py checks that
                                        they match their sources
    python docs/notebooks.py --execute  also run each one top to bottom in a scratch folder (the
                                        files a tutorial writes stay there) and write it, with its
                                        outputs, to docs/tutorials/ (not committed), where the
                                        documentation site renders it; any warning or error text in
                                        an output fails it, naming the notebook and the cell

``make notebooks`` runs the second; ``git status`` stays clean.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.py"))  # not the files a tutorial writes
EXECUTED = ROOT / "docs" / "tutorials"
WARNING_TEXT = ("Warning", "warning:", "Traceback", "Error")


def notebook_text(source: Path) -> str:
    """The .ipynb text of a tutorial's source, without outputs (what ``tutorials/NAME.ipynb`` holds),
    its cells numbered (nbformat would give them random ids, a new file every time)."""
    notebook = jupytext.read(source)
    for number, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{number}"
    return jupytext.writes(notebook, fmt="ipynb")


def execute(source: Path):
    """The tutorial run top to bottom in a scratch folder; a list of its outputs' warnings and errors."""
    from nbclient import NotebookClient

    notebook = jupytext.read(source)
    with tempfile.TemporaryDirectory() as scratch:
        # the kernel process's own log (ipykernel's "running over TCP" notice) is not the notebook's:
        # its cells' output, warnings included, comes back through the kernel's messages
        NotebookClient(notebook, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": scratch}}).execute(stderr=subprocess.DEVNULL)
    problems = []
    for number, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            if output.get("output_type") == "error" or output.get("name") == "stderr" and any(
                    word in text for word in WARNING_TEXT):
                problems.append(f"{source.stem}, cell {number}: {(text or output.get('ename', '')).strip()[:200]}")
    return notebook, problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--execute", action="store_true", help="also run each notebook, into docs/tutorials/")
    args = parser.parse_args(argv)
    problems = []
    for source in TUTORIALS:
        source.with_suffix(".ipynb").write_text(notebook_text(source))
        if args.execute:
            notebook, found = execute(source)
            EXECUTED.mkdir(parents=True, exist_ok=True)
            jupytext.write(notebook, EXECUTED / f"{source.stem}.ipynb")
            problems += found
            print(f"{source.stem}: {'ok' if not found else f'{len(found)} warnings or errors'}", file=sys.stderr)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
