"""Exact linear algebra on balls: solves, factorizations, eigenvalues and singular values.

``_solve`` (the primitives behind ``jnp.linalg.solve``/``inv``/``cholesky``: LU, triangular solves,
Cholesky), ``_eigen`` (``eigh`` and ``svd``, their vectors under a stated sign convention),
``_eigenspace`` (rank, null spaces and repeated eigenvalues of an exact operand, in rational
arithmetic), ``_qr`` and ``_tridiagonal``. Built on ``core/`` only.
"""
