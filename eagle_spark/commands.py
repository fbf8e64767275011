"""The sub-commands of ``eagle-spark``: argument declarations and thin runners over the Python API
(:mod:`eagle_spark.ml`: ``GRLR.fitDataset``, ``GRLRModel.transformDataset``, the classifiers'
``fitDataset`` / ``transformDataset``), or the stage functions where the API has no folder-level
entry (ingest, export, aggregate, synth, evaluate). :mod:`eagle_spark.cli` reads :data:`COMMANDS`;
this module never imports the CLI.

Each runner applies its explicit flags on top of the settings (flags win over ``--conf``/``--set``),
makes one library call and returns the summary printed as JSON by :func:`eagle_spark.cli.main`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import typing
from typing import TYPE_CHECKING, Any, Callable, Optional

from eagle_spark.data import embedded_path
from eagle_spark.errors import BadInputError
from eagle_spark.settings import Settings, as_params, declarations, section_class, shown

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


Runner = Callable[[Any, argparse.Namespace, Settings], dict[str, Any]]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Runner]] = {}
"""name -> (help text, declares its flags, runs it): every sub-command of ``eagle-spark``."""


def command(name: str, help_text: str, add_arguments: Callable[[argparse.ArgumentParser], None]):
    """Register a sub-command: `add_arguments` declares its flags, the decorated function runs it.

    The runner gets (spark, args, settings) and returns the summary dict printed as JSON.
    """

    def register(run: Runner) -> Runner:
        COMMANDS[name] = (help_text, add_arguments, run)
        return run

    return register


SETTING_FLAGS = "_setting_flags"
"""The parser default (dest -> (section, field)) recording a command's settings flags."""


def setting_flags(p: argparse.ArgumentParser, section: str, *names: str) -> None:
    """Declare a ``--flag`` for each named setting of `section`: its type, help and default come
    from the setting's declaration (:func:`eagle_spark.settings.setting`); a flag given on the
    command line overrides the setting as ``--set section.name=value`` would, after ``--conf``
    and ``--set`` (:func:`with_flags`). A boolean has ``--name`` and ``--no-name``.
    """
    items = {d.name: d for d in declarations(section_class(section))}
    for name in names:
        item = items[name]
        hint = item.hint
        if typing.get_origin(hint) is typing.Union:
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        help_text = f"{item.doc.rstrip('.')} ({section}.{name}, default {shown(item.default)})"
        help_text = help_text.replace("``", "")
        kwargs: dict[str, Any] = {"default": None, "help": help_text.replace("%", "%%")}
        if item.choices:
            kwargs["choices"] = list(item.choices)
        if hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(hint) is tuple:  # a list: --name A B C
            kwargs.update(nargs="+", type=typing.get_args(hint)[0])
        else:
            kwargs["type"] = hint
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, **kwargs)
        record_flag(p, name, section, name)


def record_flag(p: argparse.ArgumentParser, dest: str, section: str, name: str) -> None:
    """Make the flag whose value lands in `dest` set ``section.name`` (a hand-made flag such as
    ``--compare``; :func:`setting_flags` records its own)."""
    p.set_defaults(
        **{SETTING_FLAGS: {**(p.get_default(SETTING_FLAGS) or {}), dest: (section, name)}}
    )


def with_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """`settings` with the values of the settings flags given to the command (not None).

    Raises:
        SettingsError: a value the setting's checks refuse; the message names the setting.
    """
    changes: dict[str, dict[str, Any]] = {}
    for dest, (section, name) in (getattr(args, SETTING_FLAGS, None) or {}).items():
        if getattr(args, dest, None) is not None:
            changes.setdefault(section, {})[name] = getattr(args, dest)
    for section, values in changes.items():
        settings = settings.replace(section, **values)
    return settings


def _ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        default=None,
        help="XC or libsvm text file, plain or .gz (default: the embedded delicious train file)",
    )
    p.add_argument("--output", required=True, help="dataset folder to write")
    setting_flags(p, "ingest", "format", "one_based", "on_bad_line", "n_features", "n_labels")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command(
    "ingest", "Read an XC / libsvm text file into a dataset (X, Y Parquet tables).", _ingest_args
)
def run_ingest(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from eagle_spark.ml import Dataset

    source = args.input or embedded_path("delicious", "train")
    manifest = Dataset.ingest(
        spark, source, args.output, overwrite=args.overwrite, **as_params(settings.ingest)
    ).manifest
    return {
        "output": args.output,
        "input": source,
        "n_samples": manifest["n_samples"],
        "n_features": manifest["n_features"],
        "n_labels": manifest["n_labels"],
        "rejected_lines": manifest["rejected"]["lines"],
        **{
            k: manifest["stats"][k]
            for k in ("nnz", "labels_per_sample", "nnz_per_sample", "samples_without_labels")
        },
    }


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="dataset folder (with X, optionally Y)")
    p.add_argument("--output", required=True, help="XC text file to write (.gz for gzip)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing file")


@command(
    "export", "Write a dataset's X and Y as an XC text file (round trip of ingest).", _export_args
)
def run_export(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from eagle_spark.io.export import export_xc

    return export_xc(spark, args.input, args.output, overwrite=args.overwrite)


def _aggregate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="dataset with X and Y (from ingest or synth)")
    p.add_argument("--output", required=True, help="aggregated dataset folder to write")
    setting_flags(p, "aggregate", "grouping", "group_size", "depth", "noise", "seed", "merge")
    p.add_argument("--y1", default=None, help="user-supplied Y1 table (Parquet or CSV)")
    p.add_argument("--y2", default=None, help="user-supplied Y2 table (Parquet or CSV)")
    setting_flags(p, "aggregate", "on_bad_row")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command(
    "aggregate",
    "Group samples (random / cluster) or take user Y1/Y2; write X, Y, Y1, Y2.",
    _aggregate_args,
)
def run_aggregate(
    spark: SparkSession, args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.ml import Dataset

    manifest = (
        Dataset.at(spark, args.input)
        .aggregate(
            args.output,
            y1=args.y1,
            y2=args.y2,
            **as_params(settings.aggregate),
            overwrite=args.overwrite,
        )
        .manifest
    )
    return {
        "output": args.output,
        **{
            k: manifest[k]
            for k in (
                "n_samples",
                "n_groups",
                "group_size_mean",
                "group_size_max",
                "n_positive_pairs",
            )
        },
        "rejected_rows": sum(manifest["rejected"].values()),
    }


def _synth_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", required=True, help="folder for the train/ and test/ datasets")
    setting_flags(p, "synth", "preset", "like", "scale", "seed", "difficulty")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command(
    "synth",
    "Generate a synthetic clean XMC train/test pair of a benchmark's shape, or (--like) a twin "
    "of a labelled dataset.",
    _synth_args,
)
def run_synth(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from eagle_spark.io.tables import read_manifest
    from eagle_spark.ml import Dataset

    p = settings.synth
    Dataset.synth(spark, args.output, overwrite=args.overwrite, **as_params(p))
    pair = read_manifest(spark, args.output)
    if p.like is not None:
        model = pair["parameters"]["model"]
        return {
            "output": args.output,
            "like": p.like,
            "scale": p.scale,
            **{
                f"{split}_{k}": v
                for split, stats in pair["splits"].items()
                for k, v in stats.items()
                if k in ("n_samples", "nnz_per_sample", "labels_per_sample")
            },
            "n_features": model["n_features"],
            "n_labels": model["n_labels"],
            "fitted": {k: model[k] for k in ("cohesion", "signal", "shared", "topic_size")},
            "fit": {k: v for k, v in pair["fit"].get("oracle", {}).items() if "steps" not in k},
        }
    return {
        "output": args.output,
        "preset": p.preset,
        "scale": p.scale,
        "generator": "planted" if "difficulty" in pair["parameters"] else "realistic",
        "difficulty": pair["parameters"].get("difficulty"),
        **{
            f"{split}_{k}": v
            for split, stats in pair["splits"].items()
            for k, v in stats.items()
            if k in ("n_samples", "nnz_per_sample", "labels_per_sample")
        },
        "n_features": pair["shape"]["n_features"],
        "n_labels": pair["shape"]["n_labels"],
    }


def _embed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="aggregated dataset (X, Y1, Y2)")
    p.add_argument("--output", required=True, help="folder for label_emb/ and the manifest")
    setting_flags(p, "embed", "iterations", "lr", "normalize")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command(
    "embed",
    "Learn label embeddings with GRLR (paper Algorithm 1) as map-reduce over labels.",
    _embed_args,
)
def run_embed(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from eagle_spark.ml import GRLR, Dataset

    model = GRLR.fromSettings(settings.embed, settings.assign).fitDataset(
        Dataset.at(spark, args.input), args.output, overwrite=args.overwrite
    )
    m = model.summary
    last = m["iterations"][-1]
    return {
        "output": args.output,
        "n_labels": m["n_labels"],
        "n_pairs": m["n_pairs"],
        "iterations": settings.embed.iterations,
        "last_changed_fraction": last["changed_fraction"],
        "mean_max_score": last["mean_max_score"],
        "entries_processed": m["entries_processed"],
    }


def _assign_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="aggregated dataset (X, Y1, Y2; Y for quality)")
    p.add_argument("--embeddings", default=None, help="output folder of embed (method eagle)")
    p.add_argument("--output", required=True, help="filtered dataset to write (X, Y = Y_filter)")
    setting_flags(p, "assign", "method", "multiplicity", "weighting", "refine_rounds")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command(
    "assign",
    "Assign each group label to its best member (paper Algorithm 2) -> Y_filter.",
    _assign_args,
)
def run_assign(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from eagle_spark.ml import Dataset, GRLRModel

    if settings.assign.method == "eagle" and args.embeddings is None:
        raise BadInputError("--method eagle needs --embeddings (the output of embed)")
    model = GRLRModel.fromSettings(settings.assign)
    if args.embeddings is not None:
        model = model.atFolder(args.embeddings)
    m = model.transformDataset(
        Dataset.at(spark, args.input), args.output, overwrite=args.overwrite
    ).manifest
    out = {
        "output": args.output,
        "method": settings.assign.method,
        "n_assignments": m["n_assignments"],
        "samples_with_labels": m["samples_with_labels"],
    }
    if m["quality"]:
        out |= {"precision": m["quality"]["precision"], "recall": m["quality"]["recall"]}
    if m.get("refinement"):
        out["refinement"] = m["refinement"]
    return out


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input", required=True, help="dataset with X and Y (e.g. the output of assign)"
    )
    p.add_argument("--output", required=True, help="model folder to write")
    setting_flags(p, "train", "model")
    loss = next(d for d in declarations(section_class("tree")) if d.name == "loss")
    p.add_argument(
        "--loss",
        choices=list(loss.choices),
        default=None,
        help="the loss of the model's section (tree.loss or ova.loss)",
    )
    p.add_argument(
        "--label-repr",
        default=None,
        help="tree: cluster these label embeddings (embed's output) instead of PIFA",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing model")


@command(
    "train",
    "Train an XMC classifier on a dataset's X and Y (distributed over labels).",
    _train_args,
)
def run_train(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from eagle_spark.ml import Dataset, LabelTreeClassifier, OneVsRestXMC

    if args.loss is not None:
        settings = settings.replace(settings.train.model, loss=args.loss)
    dataset = Dataset.at(spark, args.input)
    if settings.train.model == "tree":
        tree = LabelTreeClassifier.fromSettings(settings.tree, settings.predict)
        if args.label_repr is not None:
            tree.setLabelRepr(args.label_repr)
        meta = tree.fitDataset(dataset, args.output, overwrite=args.overwrite).metadata
        return {
            "output": args.output,
            "model": "tree",
            "n_labels": meta["n_labels"],
            "n_clusters": meta["n_clusters"],
            "depth": meta["depth"],
        }
    ova = OneVsRestXMC.fromSettings(settings.ova, settings.predict)
    meta = ova.fitDataset(dataset, args.output, overwrite=args.overwrite).metadata
    return {
        "output": args.output,
        "model": settings.train.model,
        "n_labels": meta["n_labels"],
        "n_weights": meta["n_weights"],
        "n_labels_without_positives": meta["n_labels_without_positives"],
    }


def _predict_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder (from train)")
    p.add_argument("--input", required=True, help="dataset with X")
    p.add_argument("--output", required=True, help="folder for predictions/ and the manifest")
    setting_flags(p, "predict", "top_k", "beam_size")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command("predict", "Batch top-k prediction as a Spark job.", _predict_args)
def run_predict(
    spark: SparkSession, args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.ml import Dataset
    from eagle_spark.ml.classifiers import model_at

    m = model_at(spark, args.model, settings.predict).transformDataset(
        Dataset.at(spark, args.input), args.output, overwrite=args.overwrite
    )
    return {"output": args.output, "n_samples": m["n_samples"], "top_k": m["top_k"]}


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predictions", required=True, help="output folder of predict")
    p.add_argument("--input", required=True, help="dataset with the true Y")
    setting_flags(p, "evaluate", "k", "propensity_a", "propensity_b")
    p.add_argument(
        "--propensity-from",
        default=None,
        help="dataset whose Y gives the label frequencies (default: --input)",
    )
    p.add_argument("--output", default=None, help="optional folder for metrics.json and metrics.md")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")


@command(
    "evaluate", "P@k, nDCG@k, PSP@k of predictions against a dataset's Y, on Spark.", _evaluate_args
)
def run_evaluate(
    spark: SparkSession, args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.evaluation.evaluate import evaluate

    result = evaluate(
        spark,
        args.predictions,
        args.input,
        settings.evaluate,
        output_path=args.output,
        propensity_from=args.propensity_from,
        overwrite=args.overwrite,
    )
    return {"output": args.output, **result}


def _pipeline_args(p: argparse.ArgumentParser) -> None:
    setting_flags(p, "pipeline", "output", "train", "test", "dataset", "test_dataset", "aggregate")
    p.add_argument(
        "--compare",
        action="store_const",
        const=list(("baseline", "eagle0", "eagle")),
        default=None,
        dest="methods",
        help="run Baseline, EAGLE-0 and EAGLE on the same groups (the paper's Table 2)",
    )
    record_flag(p, "methods", "pipeline", "methods")
    setting_flags(p, "pipeline", "until", "format")
    p.add_argument("--force", action="store_true", help="rerun every stage, even unchanged ones")


@command(
    "pipeline",
    "The main job: ingest, aggregate, embed, assign, train, predict, evaluate "
    "(resumable); --compare prints the paper's Table 2 for Baseline / EAGLE-0 / EAGLE.",
    _pipeline_args,
)
def run_pipeline_command(
    spark: SparkSession, args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.comparison import comparison_markdown
    from eagle_spark.pipeline import run_pipeline

    result = run_pipeline(spark, settings, force=args.force)
    if result["comparison"]["until"] == "evaluate" and not logging.getLogger(
        "eagle_spark"
    ).isEnabledFor(logging.INFO):  # the pipeline logged it already
        print(comparison_markdown(result["comparison"]), file=sys.stderr, flush=True)
    return {
        "output": result["output"],
        "grouping": result["grouping"],
        "methods": result["methods"],
        "comparison": result["comparison"]["methods"],
        "stages_run": sum(r["status"] == "ran" for r in result["stages"]),
        "stages_skipped": sum(r["status"] == "skipped" for r in result["stages"]),
    }


def _experiment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "kind",
        choices=["table2", "ablation", "regression", "select"],
        help="table2: Table 2 with the Oracle; ablation: Figure 3; regression: Figure 2 "
        "(Theorem 1's simulation, numpy only, no Spark); select: score the ways of "
        "learning from group labels on held-out groups and choose by group labels alone",
    )
    p.add_argument(
        "--output", required=True, help="experiment folder (resumable; report.md inside)"
    )
    setting_flags(p, "pipeline", "train", "test", "dataset", "test_dataset")
    setting_flags(p, "experiment", "groupings", "axis", "values", "methods", "validation")
    setting_flags(p, "experiment", "seeds", "candidates", "held_out", "criterion")
    p.add_argument("--force", action="store_true", help="rerun every stage, even unchanged ones")


def _experiment_needs_spark(args: argparse.Namespace) -> bool:
    return args.kind != "regression"


@command(
    "experiment",
    "The paper's experiments: table2 (Table 2 with the Oracle), ablation (Figure 3), "
    "regression (Figure 2), and select (choosing the method from group labels alone); tables, "
    "PNG figures and report.md in --output.",
    _experiment_args,
)
def run_experiment(
    spark: Optional[SparkSession], args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.experiments import xmc

    e = settings.experiment
    if args.kind == "regression":
        from eagle_spark.experiments.regression import RegressionSetting, run

        setting = (
            RegressionSetting(seeds=e.seeds, sigma2=tuple(e.values))
            if e.values
            else RegressionSetting(seeds=e.seeds)
        )
        result = run(setting, args.output)
        return {"output": args.output, "kind": "regression", "rows": result["rows"]}
    if spark is None:  # every other kind runs Spark jobs; the command opens a session for them
        raise RuntimeError(f"experiment {args.kind}: no Spark session")
    if args.kind == "select":
        from eagle_spark.assignment.selection import CRITERION
        from eagle_spark.experiments.select import select

        out = select(
            spark,
            settings,
            list(e.groupings),
            args.output,
            e.candidates,
            e.held_out,
            e.criterion or CRITERION,
            args.force,
        )
        return {
            "output": args.output,
            "kind": "select",
            "agreement": out["agreement"],
            "chosen": {g: r["chosen"] for g, r in out["groupings"].items()},
            "groupings": out["groupings"],
        }
    if args.kind == "table2":
        result = xmc.table2(
            spark, settings, list(e.groupings), args.output, e.methods, e.validation, args.force
        )
        return {
            "output": args.output,
            "kind": "table2",
            "oracle": result["oracle"],
            "groupings": result["groupings"],
        }
    if e.axis is None or not e.values:
        raise BadInputError("experiment ablation needs --axis and --values")
    out = xmc.ablation(
        spark, settings, e.axis, list(e.values), args.output, e.methods, e.validation, args.force
    )
    return {
        "output": args.output,
        "kind": "ablation",
        "axis": out["axis"],
        "groupings": out["groupings"],
        "decrement_percent": out["decrement_percent"],
    }


run_experiment.needs_spark = _experiment_needs_spark


def _miml_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--images",
        default=None,
        help="folder with the four MNIST IDX files, gzip or not (default: the small MNIST "
        "subset shipped in the package)",
    )
    p.add_argument(
        "--output", required=True, help="local folder for results.json, curves.png, embeddings.png"
    )
    setting_flags(p, "miml", "group_size", "methods", "seeds", "epochs", "lr", "tune_lr")
    setting_flags(p, "miml", "batch_size", "hidden", "concepts", "tau")
    p.add_argument(
        "--mask-mix",
        default=None,
        help="the mask: alpha in (0, 1] for the max-normalised mask mixed with 1 (miml.mask_mix, "
        "default 0.5), or 'paper' for M = g softmax as printed",
    )
    p.add_argument(
        "--no-centring",
        action="store_const",
        const=False,
        default=None,
        dest="centre_embeddings",
        help="use the GRLR embeddings as they are (miml.centre_embeddings; default: without "
        "their shared component)",
    )
    record_flag(p, "centre_embeddings", "miml", "centre_embeddings")
    setting_flags(p, "miml", "iterations", "train_images", "test_images", "num_processes")


@command(
    "miml",
    "The MIML extension (paper section 5): Deep-MIML, EAGLE-0 and EAGLE on bags of MNIST "
    "digits (Table 3); accuracies, curves.png and embeddings.png in --output. Needs the "
    "[miml] extra (PyTorch).",
    _miml_args,
)
def run_miml_command(
    spark: SparkSession, args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.data import mnist_sample

    try:
        from eagle_spark.experiments.miml import run_miml
    except ImportError as exc:
        raise BadInputError(str(exc)) from exc
    if args.mask_mix is not None:
        try:
            mask_mix = None if args.mask_mix == "paper" else float(args.mask_mix)
        except ValueError:
            raise BadInputError(
                f"--mask-mix must be a number in (0, 1] or 'paper', got {args.mask_mix!r}"
            ) from None
        settings = settings.replace("miml", mask_mix=mask_mix)
    result = run_miml(spark, args.images or mnist_sample(), args.output, settings.miml)
    return {
        "output": args.output,
        "group_size": result["group_size"],
        "methods": {
            m: {k: r[k] for k in ("mean", "std", "paper")} for m, r in result["methods"].items()
        },
        "seconds": result["seconds"]["total"],
    }


def _verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        required=True,
        action="append",
        dest="inputs",
        metavar="PATH",
        help="a committed folder (dataset, model, embeddings, predictions, metrics); repeatable",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="write the file list of a folder that has none (tables written by another "
        "tool, or by an earlier eagle_spark) from its files as they are now",
    )


@command(
    "verify",
    "Check committed folders against their file lists: every file present, of its "
    "recorded size and CRC-32, Parquet footers readable with their recorded rows, no file "
    "added to a table; and each dataset's manifest against its tables. Exit 2 naming the "
    "first bad file.",
    _verify_args,
)
def run_verify(
    spark: Optional[SparkSession], args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    from eagle_spark.io.integrity import FILES, read_list, record, verify_folder

    folders = []
    for path in args.inputs:
        if args.record:
            if read_list(path, "folder") is not None:
                raise BadInputError(
                    f"{path} already has a file list {FILES}; `verify` without "
                    "--record checks it (a list is never replaced)"
                )
            if record(path) is None:
                raise BadInputError(f"{path} is a file or does not exist, not a folder")
            log.info("recorded the file list of %s", path)
        folders.append(verify_folder(path))
    return {"output": None, "verified": folders}


run_verify.needs_spark = lambda args: False
