"""pytest-jaxstab: find, explain and fix numerical instability in JAX code.

``import pytest_jaxstab as jst``; see README.md for the tour.
"""

from . import rewrites as rewrites
from ._errors import JaxstabError as JaxstabError
from ._errors import TraceError as TraceError
from ._stabilize import explain as explain
from ._stabilize import stabilize as stabilize

__version__ = "0.1.0"
