"""The stable forms the catalogue rewrites into, as ordinary JAX functions: ``jst.rewrites.forms``.

Each is usable on its own (``jst.rewrites.forms.logsumexp(x, axes=(0,))``) and is what the
benchmarks compare against the library's hand-written functions. One module per family: ``_core``
(sums of exponentials, softmaxes, sigmoids, norms, variances), ``_stats`` (everyday losses and
statistics), ``_moments`` (covariance matrices, merged batches), ``_gamma`` (differences of
log-gamma and digamma values), ``_special`` (the normal distribution's functions), ``_divergence``
(Bregman divergences), ``_xlogy`` (zero times log zero), ``_labels`` (the loss at a label's
logit, a masked class's log-probability), ``_gradients`` and ``_backward`` (values with repaired
derivatives), ``_factors`` (the log of a product past its range), ``_complements`` (complements of
the regularised incomplete functions, logs of Bessel functions and of the gamma tail); the last
eight are the catalogue's replacements, not exported here. The forms import nothing
of the engine or the catalogue
(docs/architecture.md, "Stage order").
"""

from ._core import hypot as hypot
from ._core import inv_jitter as inv_jitter
from ._core import inv_softplus as inv_softplus
from ._core import log1mexp as log1mexp
from ._core import log_cosh as log_cosh
from ._core import log_sigmoid_plus as log_sigmoid_plus
from ._core import log_softmax as log_softmax
from ._core import log_softmax_fast as log_softmax_fast
from ._core import logaddexp as logaddexp
from ._core import logsumexp as logsumexp
from ._core import logsumexp_fast as logsumexp_fast
from ._core import norm as norm
from ._core import one_minus_cos as one_minus_cos
from ._core import sigmoid as sigmoid
from ._core import softmax as softmax
from ._core import softplus as softplus
from ._core import tanh as tanh
from ._core import variance as variance
from ._gamma import betaln as betaln
from ._gamma import digamma_difference as digamma_difference
from ._gamma import lgamma1p as lgamma1p
from ._gamma import lgamma_difference as lgamma_difference
from ._moments import covariance as covariance
from ._moments import merged_variance as merged_variance
from ._stats import center as center
from ._stats import div_exp as div_exp
from ._stats import entropy_terms as entropy_terms
from ._stats import exp_scaled as exp_scaled
from ._stats import geometric_power as geometric_power
from ._stats import log_prod as log_prod
from ._stats import logmeanexp as logmeanexp
from ._stats import sqdist as sqdist
from ._stats import square_div_exp as square_div_exp
from ._stats import std as std
from ._stats import sum_p_log_p as sum_p_log_p

__all__ = [
    "betaln", "center", "covariance", "digamma_difference", "div_exp", "entropy_terms",
    "exp_scaled", "geometric_power", "hypot", "inv_jitter", "inv_softplus", "lgamma1p",
    "lgamma_difference", "log1mexp", "log_cosh", "log_prod", "log_sigmoid_plus", "log_softmax",
    "log_softmax_fast", "logaddexp", "logmeanexp", "logsumexp", "logsumexp_fast", "merged_variance",
    "norm", "one_minus_cos", "sigmoid", "softmax", "softplus", "sqdist", "square_div_exp", "std",
    "sum_p_log_p", "tanh", "variance",
]


def __dir__() -> list[str]:
    return sorted(__all__)
