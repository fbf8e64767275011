"""What several settings sections share: the memory floors, the method and criterion names, and
the settings declared once and reused by each section that has them (how tasks reach X, the
cache they may use, how many tasks and the least work of one)."""

from __future__ import annotations

from typing import Any, Optional

from eagle_spark.settings.declare import (
    _check,
    memory_mib,
    setting,
)

MIN_PYTHON_WORKER_MIB = 2048
"""Smallest ``spark.python_worker_memory`` accepted, in MiB. Measured on this project's worker
process: address space 0.61 GB after its imports (resident 0.21 GB); with a 1 GiB cap (and
pyarrow's default pool, which reserves 1 GiB more at first use) an 8 MiB numpy allocation failed
in the assign stage of a standalone-cluster run while the worker held ~0.33 GB."""


MIN_JVM_MIB = 512
"""Smallest ``spark.driver_memory`` / ``spark.executor_memory`` accepted, in MiB. Spark reserves
300 MiB of every JVM heap and refuses to start with less than 1.5 times that (450 MiB: "System
memory ... must be at least 471859200"); 512m is the next round size above it."""


X_ACCESS = ("auto", "cached", "joined")
"""How tasks reach X (``x_access`` of ``embed``, ``assign``, ``tree`` and ``ova``)."""

PIPELINE_METHODS = ("baseline", "eagle0", "eagle_paper", "eagle")
"""The methods the pipeline and the experiments run."""

GROUP_CRITERIA = ("max", "sum", "multiset")
"""The group-level precisions (:func:`eagle_spark.evaluation.group.group_precisions`): union-based
with max or sum, and multiset."""


# -- settings several sections share: their shape declared once ------------------------------

_CACHE_BUDGET_DOC = (
    "the executor cache size ``x_access`` auto allows, a Spark size (``4g``); null: half of "
    "``spark.python_worker_memory`` when set, else 4g."
)


def x_access_setting(doc: str, more: str, param: Optional[str] = None) -> Any:
    """``x_access`` of a stage whose tasks read X (``embed``, ``assign``, ``tree``, ``ova``):
    ``auto`` by default, one of :data:`X_ACCESS`; `doc` / `more` say what the stage's tasks get
    and how (:func:`setting`)."""
    return setting("auto", doc, more=more, param=param, choices=X_ACCESS)


def cache_budget_setting(doc: str = _CACHE_BUDGET_DOC, param: Optional[str] = None) -> Any:
    """``cache_budget`` beside :func:`x_access_setting`: null or a Spark size, checked as one."""
    return setting(None, doc, param=param, size=True)


def tasks_setting(doc: str, more: str = "", param: Optional[str] = "numTasks") -> Any:
    """``tasks`` of a stage that deals work into Spark tasks: 16 by default, at least 1."""
    return setting(16, doc, more=more, param=param, bounds="[1, inf)")


def min_task_work_setting(default: float, doc: str, more: str) -> Any:
    """``min_task_work`` beside :func:`tasks_setting`: the least estimated work a task gets
    (the stage's unit of work in `doc`), 0 or more; Param ``minTaskWork``."""
    return setting(default, doc, more=more, param="minTaskWork", bounds="[0, inf)")


def _check_jvm_memory(text: str, key: str) -> None:
    mib = memory_mib(text, key)
    _check(
        mib >= MIN_JVM_MIB,
        f"{key}={text} is below {MIN_JVM_MIB}m: Spark reserves 300 MiB of the JVM heap and "
        f"will not start a JVM with less than 450 MiB; set {MIN_JVM_MIB}m or more",
    )
