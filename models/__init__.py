"""One Pyro program per model (installed as ``bnpzoo.models``): ``bnpzoo.models.dp_gmm``,
``pyp_ggm``, ``bernoulli_mixture``, ``hdp_gd`` and ``coupled_dp``, each a function ``model``.

``copy_program(name, path)`` (or ``bnpzoo new-model NAME PATH``) writes a program's source to a
file of your own to edit; its imports are absolute, so the copy runs wherever bnpzoo is installed.
Which copies a learner fits again is in ``PROGRAMS``."""

from importlib import resources
from pathlib import Path

# name: (module, how an edited copy is fitted: None where only the shipped program's own learner applies)
PROGRAMS = {
    "dp-gmm": ("dp_gmm", "MixtureSVI(model=my_model.model).fit(X)"),
    "pyp-ggm": ("pyp_ggm", "MixtureSVI(model=my_model.model).fit(X)"),
    "hdp-gd": ("hdp_gd", "HDPGD(inference='svi', model=my_model.model).fit(X, groups)"),
    "dp-bmm": ("bernoulli_mixture", None),
    "coupled-dp": ("coupled_dp", None),
}


def copy_program(name: str, path) -> Path:
    """Write the source of the program ``name`` (a key of ``PROGRAMS``) to ``path``, a new file.

    Parameters
    ----------
    name : "dp-gmm", "pyp-ggm", "hdp-gd", "dp-bmm" or "coupled-dp".
    path : where to write it; an existing file is never overwritten.

    Returns
    -------
    The path written.
    """
    if name not in PROGRAMS:
        raise ValueError(f"no program named {name!r}: choose one of {', '.join(PROGRAMS)}")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists: give a new file name for the copy")
    path.write_text((resources.files(__name__) / f"{PROGRAMS[name][0]}.py").read_text())
    return path
