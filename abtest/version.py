"""The package version, in a module of its own so that modules that stamp it (a run's
stored summary) need not import the package root, which declares every public name."""

__version__ = "0.1.0"
