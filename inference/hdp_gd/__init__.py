"""HDP-GD's learners ([HDP-GD]): the closed-form coordinate updates and merges (``updates``), the
expected Beta normaliser they need (``beta_normaliser``), the batch and online loops
(``learner``), and Pyro's SVI on the program itself (``svi``)."""
