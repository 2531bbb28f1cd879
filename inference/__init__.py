"""Learners (installed as ``bnpzoo.inference``): they take tensors and callables, never a model name."""
