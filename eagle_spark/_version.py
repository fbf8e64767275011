"""The package's version, apart from :mod:`eagle_spark` itself so that the modules recording it
(manifests, model metadata, MLflow runs) import no more than this (the package's ``__init__``
reaches the Python API)."""

__version__ = "0.1.0"
