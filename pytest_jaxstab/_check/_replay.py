"""Failing inputs of ``jst.check`` cases kept in Hypothesis's example database, replayed first next run.

Hypothesis's database is a mapping of bytes to sets of bytes (``ExampleDatabase``); Hypothesis itself
stores choice sequences there under the digest of each test. ``jst.check`` shrinks its failures itself
(on arrays, keeping them inside the domain), so it stores the resulting input arrays, exactly, under a
key of its own per case: the settings profile decides where (``.hypothesis/examples`` by default) and
``database=None`` turns it off, as for every Hypothesis test.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._results import decode_array, encode_array

__all__ = ["FailureStore"]

# Inputs kept per case: the newest smallest failure and a few older ones still failing.
_KEEP = 3


class FailureStore:
    """The failing inputs of one case in an ``ExampleDatabase`` (or nothing, when ``database`` is None)."""

    def __init__(self, database: Any | None, case_key: str) -> None:
        self.database = database
        self.key = b"pytest-jaxstab:failures:" + hashlib.sha256(case_key.encode()).hexdigest().encode()

    def load(self) -> list[tuple[bytes, list[np.ndarray]]]:
        """The stored inputs (raw entry, arrays); undecodable entries are dropped from the database."""
        if self.database is None:
            return []
        out = []
        for raw in list(self.database.fetch(self.key)):
            try:
                out.append((raw, [decode_array(a) for a in json.loads(raw.decode())]))
            except (ValueError, TypeError, KeyError, UnicodeDecodeError, AttributeError):
                self.database.delete(self.key, raw)
        return out[:_KEEP * 2]

    def forget(self, raw: bytes) -> None:
        """Drops an entry (its input no longer fails)."""
        if self.database is not None:
            self.database.delete(self.key, raw)

    def save(self, args: Sequence[np.ndarray]) -> None:
        """Stores a failing input."""
        if self.database is None:
            return
        raw = json.dumps([encode_array(np.asarray(a)) for a in args], sort_keys=True).encode()
        self.database.save(self.key, raw)
        entries = list(self.database.fetch(self.key))
        for old in entries[: max(0, len(entries) - _KEEP)]:
            if old != raw:
                self.database.delete(self.key, old)
