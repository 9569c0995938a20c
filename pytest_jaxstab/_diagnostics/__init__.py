"""Stage: diagnostics of one function on given inputs.

Takes a function and concrete arguments; hands on where a NaN/Inf is born (``_nan_origin``: kind,
primitive, the user's line, the path through nested calls), where precision is lost (``_local_error``:
the bits each operation loses on its own, per user line) and the jitted time of a function on every
JAX backend present (``_timing``). The check calls these on its worst inputs; users call them directly.
"""

from ._local_error import LineError as LineError
from ._local_error import LocalError as LocalError
from ._local_error import analyse as analyse
from ._local_error import analyse_until as analyse_until
from ._local_error import local_error as local_error
from ._nan_origin import NanOrigin as NanOrigin
from ._nan_origin import OperandSummary as OperandSummary
from ._nan_origin import find_nan_origin as find_nan_origin
from ._timing import BackendTiming as BackendTiming
from ._timing import time_backends as time_backends
