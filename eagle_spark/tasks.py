"""How many Spark tasks a stage of label bins runs: as many as its work needs, within a bound.

A task costs about 0.1 s of its own (its Python task, its part files, the scheduler's round trip),
which on a small training set or aggregated dataset is more than its share of the work. The
classifiers' training (``tree`` / ``ova``) and GRLR (``embed``) therefore deal their units into
one task per ``min_task_work`` of estimated work, up to their ``tasks`` setting.
"""

from __future__ import annotations

import math


def tasks_for_work(tasks: int, min_task_work: float, units: int, work: float, cores: int) -> int:
    """The Spark tasks of a stage that deals `units` (labels, tree nodes) into bins.

    At most `tasks` and `units` (a task gets at least one unit); within that, one task per
    `min_task_work` of `work`, rounded up to a multiple of `cores` (so that no core waits while
    another runs one more task: 3 tasks on 2 cores take two task lengths, 4 of a third less work
    each take the same), and so never fewer than `cores`. `min_task_work` 0 gives
    ``min(tasks, units)``. The callers' results do not depend on the number (each unit is computed
    alone).

    Args:
        tasks: the stage's ``tasks`` setting (>= 1). min_task_work: its ``min_task_work`` setting
            (>= 0), in the unit of `work`.
        units: what is dealt (>= 0). work: the stage's estimated work, nonzeros of X visited (the
            classifiers: per liblinear pass, summed over their classifiers; GRLR: over its
            iterations).
        cores: the session's task slots (``defaultParallelism``).
    Returns:
        The number of tasks, >= 1.
    """
    n = max(1, min(tasks, units))
    if min_task_work <= 0:
        return n
    cores = max(1, cores)
    needed = max(1, math.ceil(work / min_task_work))
    return min(n, cores * -(-needed // cores))
