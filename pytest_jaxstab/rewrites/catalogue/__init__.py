"""The built-in catalogue: one module per family of identities, each written in the public DSL.

``_stability`` assembles ``STABILITY`` (and ``STABILITY_FAST``, ``RESULT_CHANGING``) from the
families: ``_stability_logs`` (logs of exponentials and sigmoids), ``_stability_ml`` (everyday losses),
``_stability_reduce`` (reductions, means, variances), ``_stability_select`` (selected entries of a
softmax), ``_stability_compose`` (moving an operation to where another rule fixes it),
``_stability_divergence`` (Bregman divergences; ``_divergence_read`` reads their terms),
``_stability_gamma``, ``_stability_special``, ``_stability_mass`` (the log of a mass between two
bounds, through a sign), ``_stability_sampling`` (a normal's inverse-CDF draw between two bounds),
``_stability_inverse`` (a function followed by its inverse),
``_stability_stats`` (covariances, merged batches, means of means), ``_stability_xlogy`` (zero times
log zero), ``_stability_written`` (the library's own spellings), ``_stability_factors`` (the log of
a product past its range), ``_stability_complements`` (complements of the incomplete gamma and beta
functions, logs of Bessel functions and of the gamma tail), ``_stability_labels`` (a masked class
under a zero label weight);
``_derivatives`` (``primal_derivative``), ``_performance`` with ``_scan_fusion`` (``PERFORMANCE``).

Loading the catalogue registers its rules by name (``jst.rewrites.get``), so that every stage that
resolves a rule name sees them. It imports the engine and the forms, never a later stage.
"""

from ..engine._rule import register as _register
from ._performance import PERFORMANCE as PERFORMANCE
from ._stability import RESULT_CHANGING as RESULT_CHANGING
from ._stability import STABILITY as STABILITY
from ._stability import STABILITY_FAST as STABILITY_FAST
from ._stability_reduce import MEAN as MEAN


def _register_all() -> None:
    for rule in (*STABILITY, *PERFORMANCE, *RESULT_CHANGING, *STABILITY_FAST, MEAN):
        _register(rule)


_register_all()

__all__ = ["MEAN", "PERFORMANCE", "RESULT_CHANGING", "STABILITY", "STABILITY_FAST"]
