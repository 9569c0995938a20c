"""mlkit: a small model library, as a project using pytest-jaxstab might have one.

Some functions are written the stable way, some the way they usually are first written; the test
suite next to this package checks them all, and the committed baseline (.jaxstab/baseline.json)
records the known instabilities so that CI fails only when something gets worse.
"""
