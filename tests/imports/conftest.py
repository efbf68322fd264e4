"""The import tests' project fixture (tests/support/importing.py)."""

from support.importing import proj  # noqa: F401  (a pytest fixture, found here by name)
