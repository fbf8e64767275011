"""Exceptions of eagle_spark and the exit codes the CLI maps them to.

The CLI contract: exit 0 on success, 2 on bad usage or bad input (the message says what is wrong
and where: file, line or row), 1 on an internal failure.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


class EagleError(Exception):
    """Base class of every error eagle_spark raises on purpose."""

    exit_code = EXIT_INTERNAL


class BadInputError(EagleError, ValueError):
    """Input data or arguments are wrong; the message names the file, line or row and the problem."""

    exit_code = EXIT_BAD_INPUT


class OutputExistsError(BadInputError):
    """The output path exists and overwriting was not asked for (``--overwrite``)."""


class SettingsError(BadInputError):
    """A settings file or a ``--set key=value`` override is invalid (unknown key, wrong type)."""
