"""The stick mixtures' learners (DPGMM, PYPGGM, DPBMM, MixtureSVI): the batch VMM learner with its
moves (``vmm``), the stick updates (``sticks``), the means' mean-field factors, the Fisher
information of the SGA learners, and the stochastic session that runs every SVI learner on a
stick-mixture program (``session``)."""
