"""Runs one tutorial (jupytext's percent format) as a Jupyter kernel would, without one: for
``bash .ci/gpu``, whose image has no kernel. Cells run in this program's own ``__main__``, which
has no ``__file__`` (runpy would give it one, and the spawned workers of multi-chain MCMC then
rerun the whole tutorial), and a ``%%writefile NAME`` cell writes its body to NAME in the working
folder, which is on ``sys.path`` as a kernel's is. The test device is patched in as
``tests/conftest.py`` does.

    python .ci/run_tutorial.py tutorials/07_extending_a_model.py
"""

import re
import sys
from pathlib import Path

if __name__ == "__main__":
    path = Path(sys.argv[1]).resolve()
    sys.path[:0] = ["", str(path.parents[1] / "tests")]
    import conftest  # noqa: F401  (BNPZOO_TEST_DEVICE)

    source = path.read_text()
    starts = [m.start() for m in re.finditer(r"^# %%", source, flags=re.M)] + [len(source)]
    for start, end in zip(starts, starts[1:]):  # each cell's first line: "# %% [markdown]", "# %%" or a magic
        head, body = source[start + 4:end].split("\n", 1)
        if head.startswith("writefile "):
            Path(head.split()[1]).write_text(body)
        elif not head.strip():  # blank lines keep the file's line numbers in tracebacks
            exec(compile("\n" * (source.count("\n", 0, start) + 1) + body, str(path), "exec"), globals())
