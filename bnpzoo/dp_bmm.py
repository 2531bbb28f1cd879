"""``bnpzoo.DPBMM``: the Dirichlet- (or Pitman-Yor-) process mixture of Bernoulli distributions over
binary features behind a scikit-learn face.

The one place that pairs ``models.bernoulli_mixture`` with its family (``families.beta_bernoulli``)
and the conjugate learners of the shared core (``bnpzoo.mixture``).
"""

from bnpzoo._validation import Interval, OneOf
from bnpzoo.families.beta_bernoulli import BetaBernoulliFamily, prior_means
from bnpzoo.mixture import COMMON_CONSTRAINTS, StickMixture, documented
from bnpzoo.models.bernoulli_mixture import model as bernoulli_model


@documented
class DPBMM(StickMixture):
    """Stick-breaking mixture of Bernoulli distributions: each cluster a probability per binary feature,
    with a Beta prior centred on the data's mean (``models.bernoulli_mixture``).

    Parameters (keyword-only)
    ----------
    truncation : int, K, the most clusters the fit can use.
    inference : "vmm" (batch closed-form updates with soft assignments and merge moves,
        ``inference.stick_mixture.vmm``) or "natgrad-svi" (conjugate natural-gradient SVI on minibatches,
        [PYPM-sVMM] Table I): the learners that need the family's closed forms; or "gibbs" (posterior
        samples by exact split-merge moves, ``inference.stick_mixture.sampler``).
    alpha, discount : the sticks Beta(1 - d, alpha + k d); discount 0 is the Dirichlet process.
    prior_precision : kappa0, how many samples each probability's prior Beta(kappa0 m0, kappa0 (1 - m0))
        is worth (m0 the data's mean per feature, clamped into [0.01, 0.99]).
    binarize : None (X must hold 0 and 1 only; anything else is an error naming the entry) or a
        threshold: a feature above it is 1, else 0, in fit and prediction alike (as scikit-learn's
        ``BernoulliNB``), e.g. 0.5 for pixel intensities in [0, 1].

    """

    _parameter_constraints = {
        "inference": OneOf("vmm", "natgrad-svi", "gibbs"),
        "alpha": Interval(float),
        "discount": Interval(float, 0, 1, high_open=True),
        "binarize": Interval(float, optional=True),
        **COMMON_CONSTRAINTS,
    }

    def __init__(self, *, truncation=50, inference="vmm", alpha=1.0, discount=0.0, prior_precision=2.0, binarize=None,
                 pruning_precision=None, split_moves=None, assignment=None, guide="map", max_iter=None, tol=1e-5,
                 prune_threshold=1e-3, batch_size=None, learning_rate=None, n_init=3, device=None, dtype="float32",
                 random_state=None, verbose=False, data_parallel=False, num_chains=None,
                 warmup=None, checkpoint=None, checkpoint_every=50):
        self._store(locals())

    def _encode(self, x):
        return x if self.binarize is None else (x > self.binarize).to(x.dtype)

    def _resolve(self, x) -> None:
        """Binary features only: a clear error for anything else."""
        binary = (x == 0) | (x == 1)
        if not bool(binary.all()):
            row, column = (~binary).nonzero()[0].tolist()
            raise ValueError(f"DPBMM models binary features (0 or 1); X[{row}, {column}] = {float(x[row, column])}: "
                             "give binarize=threshold to turn numbers into 0 and 1")

    def _program(self):
        return bernoulli_model

    def _family(self):
        return BetaBernoulliFamily()

    def _stick_prior(self) -> dict:
        return dict(alpha=self.alpha, discount=self.discount)

    def _given_scale(self):
        return None

    def _program_kwargs(self, std, prior_mean) -> dict:
        return dict(alpha=self.alpha, discount=self.discount, prior_mean=prior_means(prior_mean),
                    prior_precision=self.prior_precision)

