"""One Pyro program per model (installed as ``bnpzoo.models``)."""
