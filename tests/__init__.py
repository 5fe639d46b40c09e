"""The test suite, a regular package: `from tests.conftest import ...` must find this folder, not the
stray top-level `tests` package some distributions install into site-packages (ppi-python 0.2.3 does)."""
