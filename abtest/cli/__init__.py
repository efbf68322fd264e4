"""The `abtest` command (see `main`)."""

from abtest.cli.main import cli, main

__all__ = ["cli", "main"]
