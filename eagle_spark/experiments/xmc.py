"""The paper's XMC experiments on Spark: Table 2 with the oracle, and Figure 3's ablations.

One experiment folder holds everything, resumable like the pipeline (:mod:`eagle_spark.pipeline`:
a stage whose inputs and settings are unchanged is skipped)::

    DIR/data/train, data/test            the ingested XC files (or the given datasets used in place)
    DIR/data/fit, data/validation        with ``validation`` > 0: train split by a seeded hash of
                                         sample_id; the classifiers fit on data/fit and are
                                         evaluated on data/validation (tuning never sees the test set)
    DIR/models|predictions|metrics/oracle   the Oracle: the same classifier on the true Y
    DIR/groupings/<G>/                   one pipeline run folder per grouping G (aggregate, then
                                         Baseline / EAGLE-0 / EAGLE as ``pipeline --compare``)
    DIR/table2.{json,md}                 the paper's Table 2 layout, the Oracle beside the methods
    DIR/ablation_<axis>.{json,png}       Figure 3: percentage decrement over the Oracle
    DIR/report.md                        the tables with the figures embedded

Groupings are named as in the paper: ``R-g`` random groups of g samples, ``C-D`` hierarchical
balanced 2-means clusters of depth D (2^D groups), ``C-D-nS`` the same with Gaussian noise of
standard deviation S added to the clustered features (Figure 3 right: heterogeneity within a group
grows with S), ``C`` the depth of ``aggregate.depth``.

Decrement (Figure 3's y axis): 100 * (P@k of the Oracle - P@k of the method) / P@k of the Oracle.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import re
from typing import Any, Optional, Sequence

from pyspark.sql import SparkSession

from eagle_spark.comparison import METHOD_NAMES, METHODS, percent_row
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.experiments.report import refresh, table2_markdown
from eagle_spark.io.fs import FileSystem, atomic_output
from eagle_spark.pipeline import (
    Pipeline,
    Stage,
    check_inputs,
    classify,
    ingest_inputs,
    open_run,
    run_pipeline,
)
from eagle_spark.settings import Settings

log = logging.getLogger(__name__)

AXES = ("group-size", "depth", "noise")
"""The ablation axes of Figure 3: random group size, cluster depth, clustering noise."""

_NAME = re.compile(r"^(?:R-(?P<size>\d+)|C(?:-(?P<depth>\d+))?(?:-n(?P<noise>\d+(?:\.\d+)?))?)$")


@dataclasses.dataclass(frozen=True)
class Grouping:
    """One aggregation of the training set (a row block of Table 2).

    Attributes:
        name: ``R-4``, ``C-8``, ``C-8-n0.5`` (module docstring).
        grouping: ``random`` or ``cluster`` (``aggregate.grouping``).
        group_size: g of a random grouping.
        depth: D of a clustering.
        noise: sigma of the clustering noise.
    """

    name: str
    grouping: str
    group_size: Optional[int] = None
    depth: Optional[int] = None
    noise: float = 0.0

    @classmethod
    def parse(cls, text: str, default_depth: int) -> "Grouping":
        """``R-4`` / ``C`` / ``C-8`` / ``C-8-n0.5`` -> Grouping.

        Raises:
            BadInputError: any other text, or g < 1.
        """
        m = _NAME.match(text.strip())
        if m is None:
            raise BadInputError(
                f"grouping {text!r} is not R-<g>, C, C-<depth> or C-<depth>-n<noise> "
                "(e.g. R-4, R-10, C-8, C-8-n0.5)"
            )
        if m.group("size") is not None:
            size = int(m.group("size"))
            if size < 1:
                raise BadInputError(f"grouping {text!r}: the group size must be >= 1")
            return cls(f"R-{size}", "random", group_size=size)
        depth = int(m.group("depth")) if m.group("depth") is not None else default_depth
        noise = float(m.group("noise") or 0.0)
        return cls(
            f"C-{depth}" + (f"-n{noise:g}" if noise else ""), "cluster", depth=depth, noise=noise
        )

    def apply(self, settings: Settings) -> Settings:
        """`settings` with the ``aggregate`` section of this grouping."""
        changes: dict[str, Any] = {"grouping": self.grouping}
        if self.grouping == "random":
            changes["group_size"] = self.group_size
        else:
            changes |= {"depth": self.depth, "noise": self.noise}
        return settings.replace("aggregate", **changes)


def axis_groupings(axis: str, values: Sequence[float], settings: Settings) -> list[Grouping]:
    """The groupings an ablation axis sweeps: ``group-size`` R-v, ``depth`` C-v, ``noise``
    C-<aggregate.depth>-nv.

    Raises:
        BadInputError: an unknown axis, no values, or a value of the wrong kind (a fractional or
            non-positive group size or depth, a negative noise).
    """
    if axis not in AXES:
        raise BadInputError(f"unknown ablation axis {axis!r}; axes: {', '.join(AXES)}")
    if not values:
        raise BadInputError(f"ablation {axis}: give at least one value")
    out = []
    for v in values:
        if axis == "noise":
            if not v >= 0:
                raise BadInputError(f"ablation noise: values must be >= 0, got {v:g}")
            out.append(
                Grouping.parse(
                    f"C-{settings.aggregate.depth}-n{v:g}"
                    if v
                    else f"C-{settings.aggregate.depth}",
                    settings.aggregate.depth,
                )
            )
        else:
            if v != int(v) or v < (1 if axis == "group-size" else 0):
                raise BadInputError(
                    f"ablation {axis}: values must be whole numbers >= "
                    f"{1 if axis == 'group-size' else 0}, got {v:g}"
                )
            out.append(
                Grouping.parse(
                    f"R-{int(v)}" if axis == "group-size" else f"C-{int(v)}",
                    settings.aggregate.depth,
                )
            )
    return out


def _split_stage(
    pipe: Pipeline,
    train_data: str,
    validation: float,
    seed: int,
    by: str = "sample",
    names: tuple[str, str] = ("fit", "validation"),
) -> tuple[str, str]:
    """Stages ``split_<name>``: `train_data` cut by a seeded hash (a share `validation` held out)
    into ``data/<names[0]>`` and ``data/<names[1]>`` (:meth:`eagle_spark.ml.Dataset.split`:
    ``by=sample`` the validation split of table2, ``by=group`` the held-out groups of ``experiment
    select``). Returns (kept dataset, held-out dataset)."""
    from eagle_spark.ml import Dataset

    def split(path: str, held: bool) -> dict:
        part = Dataset.load(pipe.spark, train_data)
        return part.split_part(path, validation, seed, by, held, overwrite=True).manifest

    out = {}
    for name, held in zip(names, (False, True)):
        path = pipe.path("data", name)
        pipe.run_stage(
            Stage(
                f"split_{name}",
                path,
                [train_data],
                {"validation": validation, "seed": seed, "by": by},
                functools.partial(split, path, held),
                "n_samples",
            )
        )
        out[name] = path
    return out[names[0]], out[names[1]]


def run_groupings(
    spark: SparkSession,
    settings: Settings,
    groupings: Sequence[Grouping],
    output: str,
    methods: Sequence[str] = METHODS,
    validation: float = 0.0,
    force: bool = False,
) -> dict[str, Any]:
    """Train and evaluate the Oracle once and every method on every grouping (Table 2's numbers).

    Args:
        spark: the active session.
        settings: all settings; ``pipeline.train`` / ``test`` (XC files) or ``dataset`` /
            ``test_dataset`` name the data (default: the embedded delicious files); the
            classifier is ``train.model``'s, the same for the Oracle and every method.
        groupings: the aggregations to compare (:class:`Grouping`).
        output: the experiment folder (module docstring); locked for the run.
        methods: a subset of ``baseline``, ``eagle0``, ``eagle``.
        validation: share of the training set held out to evaluate on instead of the test set
            (0: evaluate on the test set).
        force: rerun every stage.
    Returns:
        {"output", "validation", "evaluated_on", "oracle": row, "groupings": {name: {method: row}}}
        where a row has P_percent / nDCG_percent / PSP_percent (lists @1..k) and assignment
        precision / recall in percent (None for the Oracle).
    Raises:
        BadInputError: bad inputs (as :func:`eagle_spark.pipeline.run_pipeline`), an unknown method,
            no grouping, or validation outside [0, 0.9].
    """
    if not groupings:
        raise BadInputError("give at least one grouping (e.g. R-4)")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise BadInputError(f"unknown methods {unknown}; methods: {', '.join(METHODS)}")
    if not 0.0 <= validation <= 0.9:
        raise BadInputError(f"validation must be in [0, 0.9], got {validation}")
    names = [g.name for g in groupings]
    if len(set(names)) != len(names):
        raise BadInputError(f"a grouping is named twice: {names}")
    settings = settings.replace("pipeline", output=output, until="evaluate", methods=tuple(methods))
    pipe = Pipeline(spark, settings, force)
    check_inputs(pipe)
    with open_run(pipe):
        train_data, test_data = ingest_inputs(pipe)
        fit_data = train_data
        if validation > 0:
            fit_data, test_data = _split_stage(
                pipe, train_data, validation, settings.aggregate.seed
            )
        oracle = classify(pipe, "oracle", fit_data, test_data, fit_data)
        results: dict[str, Any] = {}
        for g in groupings:
            run_settings = g.apply(settings).replace(
                "pipeline",
                output=pipe.path("groupings", g.name),
                train=None,
                test=None,
                dataset=fit_data,
                test_dataset=test_data,
                aggregate=True,
            )
            log.info("experiment: grouping %s -> %s", g.name, run_settings.pipeline.output)
            res = run_pipeline(spark, run_settings, force=force)
            results[g.name] = {
                m: {k: v for k, v in row.items() if k != "name"}
                for m, row in res["comparison"]["methods"].items()
            }
    return {
        "output": output,
        "validation": validation,
        "evaluated_on": "validation split of train" if validation > 0 else "test set",
        "model": settings.train.model,
        "oracle": percent_row(oracle.get("metrics"), None),
        "groupings": results,
    }


def decrement(oracle: float, value: float) -> float:
    """Figure 3's y value: 100 * (oracle - value) / oracle, in percent of the Oracle's score.

    Raises:
        ValueError: oracle <= 0 (no decrement is defined).
    """
    if not oracle > 0:
        raise ValueError(f"the Oracle's score must be > 0, got {oracle}")
    return 100.0 * (oracle - value) / oracle


def _write(spark: SparkSession, path: str, data: bytes) -> None:
    """Replace the file `path` with `data`, committed atomically."""
    with atomic_output(spark, path, overwrite=True) as tmp:
        FileSystem(spark).write_bytes(tmp, data)


def table2(
    spark: SparkSession,
    settings: Settings,
    groupings: Sequence[str],
    output: str,
    methods: Sequence[str] = METHODS,
    validation: float = 0.0,
    force: bool = False,
) -> dict[str, Any]:
    """Table 2: Oracle, Baseline, EAGLE-0 and EAGLE on every grouping; writes ``table2.json``,
    ``table2.md`` and ``report.md`` in `output`. Arguments as :func:`run_groupings` (groupings by
    name, e.g. ``["R-4", "R-10", "C-8"]``). Returns the result of :func:`run_groupings`.

    Raises:
        BadInputError: a grouping name that does not parse, and as :func:`run_groupings`.
    """
    parsed = [Grouping.parse(g, settings.aggregate.depth) for g in groupings]
    result = run_groupings(spark, settings, parsed, output, methods, validation, force)
    md = table2_markdown(result)
    _write(
        spark, f"{output.rstrip('/')}/table2.json", (strict_json(result, indent=2) + "\n").encode()
    )
    _write(spark, f"{output.rstrip('/')}/table2.md", (md + "\n").encode())
    refresh(spark, output)
    log.info("table 2 -> %s/table2.md:\n%s", output.rstrip("/"), md)
    return result


def ablation(
    spark: SparkSession,
    settings: Settings,
    axis: str,
    values: Sequence[float],
    output: str,
    methods: Sequence[str] = METHODS,
    validation: float = 0.0,
    force: bool = False,
) -> dict[str, Any]:
    """Figure 3: the percentage decrement of P@1/3/5 over the Oracle for each method as `axis`
    varies; writes ``ablation_<axis>.json``, ``ablation_<axis>.png`` and ``report.md``.

    Args:
        axis: ``group-size`` (random groups of each value), ``depth`` (clusters of each depth) or
            ``noise`` (clusters of depth ``aggregate.depth``, each value a noise sigma).
        values: the axis' values.
        Others as :func:`run_groupings`.
    Returns:
        {"axis", "values", "groupings", "oracle", "decrement_percent": {method: {"P@1": [...], ...}},
        "result": run_groupings' result}.
    Raises:
        BadInputError: as :func:`axis_groupings` and :func:`run_groupings`.
    """
    groupings = axis_groupings(axis, values, settings)
    result = run_groupings(spark, settings, groupings, output, methods, validation, force)
    oracle = result["oracle"]["P_percent"]
    dec: dict[str, dict[str, list]] = {}
    for m in methods:
        dec[m] = {
            f"P@{a}": [
                round(
                    decrement(oracle[a - 1], result["groupings"][g.name][m]["P_percent"][a - 1]), 2
                )
                for g in groupings
            ]
            for a in (1, 3, 5)
            if a <= len(oracle)
        }
    out = {
        "axis": axis,
        "values": [float(v) for v in values],
        "groupings": [g.name for g in groupings],
        "oracle_P_percent": oracle,
        "decrement_percent": dec,
        "result": result,
    }
    base = output.rstrip("/")
    _write(spark, f"{base}/ablation_{axis}.json", (strict_json(out, indent=2) + "\n").encode())
    _write(spark, f"{base}/ablation_{axis}.png", ablation_png(out))
    refresh(spark, output)
    return out


_XLABEL = {
    "group-size": "random group size g",
    "depth": "cluster depth D (2^D groups)",
    "noise": "clustering noise sigma (heterogeneity within a group)",
}


def ablation_png(out: dict[str, Any]) -> bytes:
    """The ablation figure (one panel per P@k, a line per method) as PNG bytes."""
    from eagle_spark.experiments.figures import new_figure

    metrics = list(next(iter(out["decrement_percent"].values())).keys())
    fig, axes = new_figure(len(metrics), width=4.2)
    for ax, metric in zip(axes, metrics):
        for m, marker in zip(METHODS, ("o", "^", "D", "s")):
            if m in out["decrement_percent"]:
                ax.plot(
                    out["values"],
                    out["decrement_percent"][m][metric],
                    marker=marker,
                    label=METHOD_NAMES[m],
                )
        ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(_XLABEL[out["axis"]])
        ax.set_ylabel(f"{metric} decrement over the Oracle (%)")
        ax.set_title(
            f"{metric} (Oracle {out['oracle_P_percent'][int(metric[2:]) - 1]:.2f})", fontsize=10
        )
        if out["axis"] == "depth" or out["axis"] == "group-size":
            ax.set_xticks(out["values"])
        ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


__all__ = [
    "AXES",
    "Grouping",
    "ablation",
    "ablation_png",
    "axis_groupings",
    "decrement",
    "run_groupings",
    "table2",
]
