"""The ``eagle-spark`` command line (also ``python -m eagle_spark``).

The contract every stage keeps:

* commands (:data:`eagle_spark.commands.COMMANDS`, listed by ``eagle-spark --help``): ``ingest``,
  ``export``, ``aggregate``, ``synth``, ``embed``, ``assign``, ``train``, ``predict``,
  ``evaluate``, ``pipeline``, ``experiment``, ``miml``, ``verify``;
* every command takes ``--conf FILE`` (YAML shaped like :class:`eagle_spark.settings.Settings`),
  repeated ``--set section.key=value`` and ``--print-defaults`` (prints the merged settings as
  YAML and exits 0, without needing the command's required flags);
* on success it prints ONE JSON line on stdout (``command``, ``output``, counts, ``seconds``), or
  writes it to ``--summary FILE`` and prints nothing on stdout; it writes
  ``_manifest.json`` into its output folder, and exits 0; bad usage or bad input exits 2 with a
  message on stderr saying what is wrong and where (file, line, row); an internal failure exits 1;
* progress is logged per stage on stderr through :mod:`logging` (``--log-level``): the running Spark
  stage's tasks done / total (:mod:`eagle_spark.progress`; a redrawn bar on a terminal).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any, Sequence

from eagle_spark._version import __version__
from eagle_spark.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    BadInputError,
    EagleError,
    OutputExistsError,
    from_task_failure,
    storage_error,
    strict_json,
)
from eagle_spark.logs import configure as configure_logging
from eagle_spark.logs import to_log4j
from eagle_spark.settings import Settings

log = logging.getLogger("eagle_spark")


AFTER = "_after_command"
"""Prefix of the destinations of the options given after the command (:func:`_common`)."""


def _common(parser: argparse.ArgumentParser, after_command: bool = False) -> None:
    """The options every command takes, before or after its name.

    argparse copies a subcommand's whole namespace over the main parser's, so an option declared
    on both with a default would reset a value given before the command (``eagle-spark --conf F
    train ...`` would run on the defaults). After the command (`after_command`) the options
    therefore have no default (``argparse.SUPPRESS``) and ``--set`` lands in its own list, which
    :func:`_merge_after_command` appends to the one given before.
    """
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if after_command else {}
    parser.add_argument(
        "--conf", metavar="FILE", help="YAML settings file (see --print-defaults)", **unset
    )
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        dest=f"{AFTER}_overrides" if after_command else "overrides",
        help="override one setting, e.g. --set spark.master=local[2] (repeatable)",
        **(unset or {"default": []}),
    )
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="run on a Spark Connect server: sc://host:port (or local[N]: a Connect server in "
        "this process); the same as --set spark.remote=URL",
        **(unset or {"default": None}),
    )
    parser.add_argument(
        "--print-defaults",
        action="store_true",
        help="print the settings in force as YAML and exit",
        **unset,
    )
    parser.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="eagle_spark's log level on stderr (default INFO; WARNING hides progress)",
        **(unset or {"default": "INFO"}),
    )
    parser.add_argument(
        "--summary",
        metavar="FILE",
        help="write the JSON summary to FILE (a local path of the driver, written "
        "atomically) instead of stdout, which then stays empty",
        **(unset or {"default": None}),
    )


def _merge_after_command(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with the ``--set`` options given after the command appended to those given before
    it (later ones win, as on one command line)."""
    after = vars(args).pop(f"{AFTER}_overrides", None)
    if after:
        args.overrides = [*getattr(args, "overrides", []), *after]
    return args


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every command of :data:`eagle_spark.commands.COMMANDS`."""
    from eagle_spark.commands import COMMANDS  # imported here so that `--version` stays fast

    parser = argparse.ArgumentParser(
        prog="eagle-spark",
        description="Extreme multi-label classification from aggregated labels (EAGLE) on Spark.",
    )
    parser.add_argument("--version", action="version", version=f"eagle_spark {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p, after_command=True)
        add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 internal failure, 2 bad usage or input).

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).
    """
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if "--print-defaults" in argv and not {"-h", "--help", "--version"} & set(argv):
            # the settings alone: a command's required flags are not needed to print them
            from eagle_spark.commands import COMMANDS

            only = argparse.ArgumentParser(prog="eagle-spark", add_help=False)
            _common(only)
            only.add_argument("command", nargs="?", choices=list(COMMANDS))
            args, _ = only.parse_known_args(argv)
        else:
            args = _merge_after_command(parser.parse_args(argv))
    except SystemExit as exc:  # argparse: --help/--version exit 0, bad usage exits 2
        return int(exc.code or 0)
    configure_logging(args.log_level)
    from eagle_spark.io.fs import absolute

    for flag in (*INPUT_FLAGS, *OUTPUT_FLAGS):  # the tasks read and write them: absolute
        if flag == "model" and getattr(args, "command", None) == "train":
            continue  # train's --model is the kind of model (tree, ova), not a folder
        if isinstance(getattr(args, flag, None), str):
            setattr(args, flag, absolute(getattr(args, flag)))
    if isinstance(getattr(args, "inputs", None), list):
        args.inputs = [absolute(p) if isinstance(p, str) else p for p in args.inputs]
    from eagle_spark.commands import with_flags

    try:
        remote = [f"spark.remote={args.remote}"] if getattr(args, "remote", None) else []
        settings = with_flags(Settings.load(args.conf, [*args.overrides, *remote]), args)
    except EagleError as err:
        print(f"eagle-spark: error: {err}", file=sys.stderr)
        return err.exit_code
    if args.print_defaults:
        print(settings.to_yaml(), end="")
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    return _run(args.command, args, settings)


# Flags that name what a command reads: a damaged file under one of them is bad input (exit 2), and
# no command may write over, into or around one of them.
INPUT_FLAGS = (
    "input",
    "embeddings",
    "model",
    "predictions",
    "y1",
    "y2",
    "label_repr",
    "propensity_from",
    "train",
    "test",
    "dataset",
    "test_dataset",
)
OUTPUT_FLAGS = ("output",)


def command_inputs(args: argparse.Namespace) -> list[str]:
    """The input paths given to a command (its :data:`INPUT_FLAGS` that are set, and the paths of
    a repeated ``--input``)."""
    found = [getattr(args, f) for f in INPUT_FLAGS if isinstance(getattr(args, f, None), str)]
    return found + [p for p in getattr(args, "inputs", None) or () if isinstance(p, str)]


def check_summary_path(args: argparse.Namespace, inputs: Sequence[str]) -> None:
    """Refuse a ``--summary FILE`` that would destroy something, before any work.

    The file may not be, or lie inside, an input (it would replace a manifest or a table's file),
    nor be an existing folder; an existing file is replaced only with ``--overwrite`` or when it
    lies inside the command's own output folder (a run folder's ``summary.json``, rewritten by
    each run of a scheduled job).

    Raises:
        BadInputError: the path overlaps an input or is a folder.
        OutputExistsError: the file exists and may not be replaced.
    """
    from eagle_spark.io.fs import check_separate

    path = args.summary
    if not path:
        return
    check_separate(path, inputs)
    if os.path.isdir(path):
        raise BadInputError(f"--summary {path} is a folder; give a file path")
    if os.path.lexists(path) and not summary_replaceable(args):
        raise OutputExistsError(f"--summary file {path} exists", path=path, existed=True)


def summary_replaceable(args: argparse.Namespace) -> bool:
    """Whether an existing ``--summary`` file may be replaced: with ``--overwrite``, or when it lies
    inside the command's own ``--output`` folder."""
    from eagle_spark.io.fs import overlaps

    output = getattr(args, "output", None)
    return bool(getattr(args, "overwrite", False)) or (
        isinstance(output, str) and overlaps(args.summary, output)
    )


def _run(name: str, args: argparse.Namespace, settings: Settings) -> int:
    from pyspark.sql import SparkSession

    from eagle_spark.commands import COMMANDS
    from eagle_spark.io.fs import check_separate, input_read_errors
    from eagle_spark.progress import SparkProgress, phase
    from eagle_spark.session import build_spark

    _, _, run = COMMANDS[name]
    started = time.monotonic()
    owned = SparkSession.getActiveSession() is None
    spark = None
    inputs = command_inputs(args)
    try:
        for flag in OUTPUT_FLAGS:  # before anything runs
            if isinstance(getattr(args, flag, None), str):
                check_separate(getattr(args, flag), inputs)
        check_summary_path(args, inputs)
        needs_spark = getattr(run, "needs_spark", None)
        if needs_spark is not None and not needs_spark(args):  # e.g. a numpy-only simulation
            log.info("%s: started (no Spark session)", name)
            summary = run(None, args, settings)
        else:
            spark = build_spark(settings.spark)
            to_log4j(
                spark, args.log_level
            )  # under spark-submit: stdout is for the summary line only
            log.info("%s: started", name)
            with input_read_errors(inputs), phase(spark, name), SparkProgress(spark):
                summary = run(spark, args, settings)
        strict_json(summary)  # NumericalError naming the key if a NaN / inf reached the summary
        seconds = round(time.monotonic() - started, 3)
        log.info("%s: done in %.1f s", name, seconds)
    except Exception as exc:  # noqa: BLE001 - every failure becomes an exit code
        err = from_task_failure(exc) or storage_error(exc, getattr(args, "output", None))
        if err is None:  # internal failure: full traceback for the bug report
            log.exception("%s: internal failure", name)
            return EXIT_INTERNAL
        if err is not exc:
            log.debug("%s: raised in a Spark task", name, exc_info=exc)
        hint = (
            "; pass --overwrite to replace it"
            if isinstance(err, OutputExistsError) and err.existed
            else ""
        )
        print(f"eagle-spark {name}: error: {err}{hint}", file=sys.stderr)
        return err.exit_code
    finally:
        if owned and spark is not None:
            spark.stop()
    line = strict_json({"command": name, **summary, "seconds": seconds}, sort_keys=False)
    if args.summary:
        try:
            _write_summary(args.summary, line, summary_replaceable(args))
        except (OSError, OutputExistsError) as err:
            failure: Exception = err
            if isinstance(err, OSError):
                failure = storage_error(err, args.summary) or BadInputError(
                    f"cannot write --summary file {args.summary}: {err}"
                )
            print(f"eagle-spark {name}: error: {failure}", file=sys.stderr)
            return getattr(failure, "exit_code", EXIT_BAD_INPUT)
    else:
        print(line, flush=True)
    return EXIT_OK


def _write_summary(path: str, line: str, replace: bool) -> None:
    """Write the summary line to `path` atomically: a temporary sibling, fsynced, then renamed
    over `path` (`replace`) or linked to it (fails if `path` appeared meanwhile).

    Raises:
        OutputExistsError: `path` exists and `replace` is false.
        OSError: the file system refused (disk full, permission, read-only).
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise OutputExistsError(
                    f"--summary file {path} appeared while running; not replaced",
                    path=path,
                    existed=True,
                ) from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
