"""Hand-written guides, one file per model with the model's file name (``bnpzoo.guides``)."""
