"""Says whether the package registry serves a JAX release newer than the newest one the suite passed on.

Run by ``.ci/run`` (never a gate: a new JAX release must not stop a submission from landing, and
pyproject's range keeps it out until it is tested): ``python3 ci/newest_jax.py PYTHON`` where PYTHON is
an interpreter with pytest-jaxstab installed. Prints one dated line; ``make check-newest-jax`` runs the
suite on that release (README, "Supported versions").
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys


def main(python: str) -> int:
    tested = subprocess.run([python, "-c", "from pytest_jaxstab import _compat; "
                             "print(_compat.TESTED_JAX[-1][0])"], capture_output=True, text=True, check=True)
    newest_tested = tested.stdout.strip()
    asked = subprocess.run([python, "-m", "pip", "index", "versions", "jax"], capture_output=True, text=True)
    match = re.search(r"^jax \(([^)]+)\)", asked.stdout, flags=re.M)
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    if match is None:
        print(f"== ci: {today}: could not ask the registry for JAX's newest release "
              f"(newest tested: {newest_tested})")
        return 0
    newest = match.group(1)
    if newest == newest_tested:
        print(f"== ci: {today}: the registry's newest JAX, {newest}, is the newest tested release")
    else:
        print(f"== ci: {today}: the registry serves jax {newest}; "
              f"the newest tested release is {newest_tested}: "
              "run `make check-newest-jax` and take it in (README, \"Supported versions\")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.executable))
