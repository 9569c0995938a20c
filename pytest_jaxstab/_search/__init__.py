"""Search for a more accurate program when the rewrite catalogue has none (``jst.improve``).

Modules, left to right: ``_expr`` (the term language and its one operator table), ``_lower`` (jaxpr to
term), ``_localize`` (the sub-term to search, by local error), ``_rules`` (the identities), ``_egraph``
(egglog saturation), ``_extract`` (candidates out of the e-graph), ``_judge`` (samples and the oracle),
``_regimes`` (``where`` by input range), ``_roots`` (conjugate and scaled forms of
``b +- sqrt(b*b + r)``), ``_source`` (printing), ``_result`` (``Improvement``),
``_improve`` (the pipeline); ``_derivative`` (``derivatives=``: each partial derivative searched as a
program of its own and installed through ``jax.custom_jvp``).
"""

from ._improve import improve as improve
from ._result import Candidate as Candidate
from ._result import Improvement as Improvement

__all__ = ["Candidate", "Improvement", "improve"]
