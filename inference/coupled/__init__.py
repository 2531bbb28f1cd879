"""The coupled model's Gibbs sampler ([Coupled-DP] section 4): its state and sweeps (``gibbs``), the numba
loops (``compiled``, ``cells``), the ``pyro.infer.MCMC`` kernel (``kernel``) and its resumable
chain files (``checkpoint``)."""
