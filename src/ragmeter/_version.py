"""The package version, in one place (read by setuptools at build time and by ``ragmeter.__version__``)."""

__version__ = "0.1.0"
