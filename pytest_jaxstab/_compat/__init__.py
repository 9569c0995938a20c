"""The one place that touches JAX internals (``_jaxpr``: jaxprs and their parts; ``_views``: source
locations, control flow, 64-bit mode, the primitive registry).

Everything else in pytest-jaxstab goes through the functions here, so a JAX release that moves an
internal breaks this package and nothing else. Supported: jax 0.10.2 (``make test-compat``) to 0.12.1
(``make test``), the releases listed in ``_versions.TESTED_JAX``. The differences hidden here:

* ``ClosedJaxpr`` (0.10) is merged into ``Jaxpr`` (0.12): a jaxpr with ``consts`` attached. Both expose
  ``.jaxpr`` (itself in 0.12) and ``.consts``, which is what :func:`parts` relies on.
* ``scan`` splits its operands with ``num_consts``/``num_carry`` (0.10) or with the flat trees
  ``ft_in``/``ft_out`` (0.12): :func:`scan_parts`.
* ``Var(aval)`` (0.12) replaced ``gensym()(aval)``: :func:`new_var`.
* ``Primitive.get_bind_params`` returns a dict (0.12) or ``(subfuns, params)`` (older): :func:`bind`.
* ``pjit_p`` was renamed ``jit_p``; the primitive is named ``jit`` (or ``pjit``):
  :data:`pytest_jaxstab._primitives.CALLS`.
* ``jax.enable_x64`` (a thread-local context) replaced toggling the global ``jax_enable_x64`` flag:
  :func:`enable_x64`.
* Library functions move into calls of their own (0.12.1: ``logsumexp``, ``softmax``, ``soft_sign``'s
  body in ``custom_jvp`` calls): :func:`library_function` names what a call computes (``_library``).
* JAX's samplers move (0.12.1: ``_gamma_impl`` became ``_gamma_impl_local``; ``poisson`` got a
  primitive, ``random_poisson``): :func:`random_gamma_program`, :func:`random_poisson_program`. A
  ``custom_jvp``'s static arguments (``jn``'s order) live only in its derivative rule:
  :func:`custom_jvp_static_args`.

Nothing here knows about rewrites, oracles or pytest.
"""

from ._jaxpr import JAX_VERSION as JAX_VERSION
from ._jaxpr import ClosedJaxpr as ClosedJaxpr
from ._jaxpr import Eqn as Eqn
from ._jaxpr import Literal as Literal
from ._jaxpr import Site as Site
from ._jaxpr import Tracer as Tracer
from ._jaxpr import Var as Var
from ._jaxpr import as_closed as as_closed
from ._jaxpr import as_fun as as_fun
from ._jaxpr import aval as aval
from ._jaxpr import bind as bind
from ._jaxpr import build_closed as build_closed
from ._jaxpr import callee as callee
from ._jaxpr import check_jaxpr as check_jaxpr
from ._jaxpr import close as close
from ._jaxpr import constvars as constvars
from ._jaxpr import custom_call_parts as custom_call_parts
from ._jaxpr import custom_jvp_static_args as custom_jvp_static_args
from ._jaxpr import dce as dce
from ._jaxpr import eqn_name as eqn_name
from ._jaxpr import eqns as eqns
from ._jaxpr import eval_jaxpr as eval_jaxpr
from ._jaxpr import in_scope_named as in_scope_named
from ._jaxpr import invars as invars
from ._jaxpr import is_dropvar as is_dropvar
from ._jaxpr import is_literal as is_literal
from ._jaxpr import is_tracer as is_tracer
from ._jaxpr import jvp_rule_jaxpr as jvp_rule_jaxpr
from ._jaxpr import jvp_rule_rewritten as jvp_rule_rewritten
from ._jaxpr import leading_consts as leading_consts
from ._jaxpr import literal_value as literal_value
from ._jaxpr import name_stack as name_stack
from ._jaxpr import new_var as new_var
from ._jaxpr import outvars as outvars
from ._jaxpr import parts as parts
from ._jaxpr import primitive_name as primitive_name
from ._jaxpr import replace_subjaxprs as replace_subjaxprs
from ._jaxpr import scope_names as scope_names
from ._jaxpr import subjaxprs as subjaxprs
from ._jaxpr import trace as trace
from ._jaxpr import typeof as typeof
from ._jaxpr import user_context as user_context
from ._jaxpr import walk as walk
from ._jaxpr import with_jvp_rule as with_jvp_rule
from ._jaxpr import with_operands as with_operands
from ._jaxpr import with_traceback_of as with_traceback_of
from ._library import INLINED_CALLS as INLINED_CALLS
from ._library import LIBRARY_CALLS as LIBRARY_CALLS
from ._library import accurate_library_call as accurate_library_call
from ._library import inlined_library_function as inlined_library_function
from ._library import library_function as library_function
from ._library import library_places as library_places
from ._library import traced_in_accurate_call as traced_in_accurate_call
from ._versions import RELEASES_BETWEEN as RELEASES_BETWEEN
from ._versions import TESTED_JAX as TESTED_JAX
from ._versions import installed_jax as installed_jax
from ._versions import untested_jax as untested_jax
from ._views import ScanParts as ScanParts
from ._views import SourceLine as SourceLine
from ._views import WhileParts as WhileParts
from ._views import caller_of as caller_of
from ._views import cond_parts as cond_parts
from ._views import enable_x64 as enable_x64
from ._views import hi_primitive_expansion as hi_primitive_expansion
from ._views import in_transpose as in_transpose
from ._views import location as location
from ._views import oracle_only_primitive as oracle_only_primitive
from ._views import random_gamma_program as random_gamma_program
from ._views import random_poisson_program as random_poisson_program
from ._views import refine_source as refine_source
from ._views import registered_primitives as registered_primitives
from ._views import scan as scan
from ._views import scan_parts as scan_parts
from ._views import source_line as source_line
from ._views import source_line_in as source_line_in
from ._views import user_frames as user_frames
from ._views import user_scopes as user_scopes
from ._views import while_parts as while_parts

__all__ = [
    "ClosedJaxpr",
    "Eqn",
    "INLINED_CALLS",
    "JAX_VERSION",
    "LIBRARY_CALLS",
    "Literal",
    "RELEASES_BETWEEN",
    "ScanParts",
    "Site",
    "SourceLine",
    "TESTED_JAX",
    "Tracer",
    "Var",
    "WhileParts",
    "accurate_library_call",
    "as_closed",
    "as_fun",
    "aval",
    "bind",
    "build_closed",
    "callee",
    "caller_of",
    "check_jaxpr",
    "close",
    "cond_parts",
    "constvars",
    "custom_call_parts",
    "custom_jvp_static_args",
    "dce",
    "enable_x64",
    "eqn_name",
    "eqns",
    "eval_jaxpr",
    "hi_primitive_expansion",
    "in_scope_named",
    "in_transpose",
    "inlined_library_function",
    "installed_jax",
    "invars",
    "is_dropvar",
    "is_literal",
    "is_tracer",
    "jvp_rule_jaxpr",
    "jvp_rule_rewritten",
    "leading_consts",
    "library_function",
    "library_places",
    "literal_value",
    "location",
    "name_stack",
    "new_var",
    "oracle_only_primitive",
    "outvars",
    "parts",
    "primitive_name",
    "random_gamma_program",
    "random_poisson_program",
    "refine_source",
    "registered_primitives",
    "replace_subjaxprs",
    "scan",
    "scan_parts",
    "scope_names",
    "source_line",
    "source_line_in",
    "subjaxprs",
    "trace",
    "traced_in_accurate_call",
    "typeof",
    "untested_jax",
    "user_context",
    "user_frames",
    "user_scopes",
    "walk",
    "while_parts",
    "with_jvp_rule",
    "with_operands",
    "with_traceback_of",
]
