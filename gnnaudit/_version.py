"""The version of gnnaudit, in its own leaf module so that every layer may read it without
importing the package root."""

__version__ = "0.2.0"
