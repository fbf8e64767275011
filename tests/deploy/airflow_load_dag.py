"""Run with an Airflow interpreter: parse a DAG folder and print the eagle_daily DAG as one JSON line.

Usage: ``<airflow python> airflow_load_dag.py DAG_FOLDER DS``. Used by test_airflow_dag.py.
"""

import json
import sys

try:
    from airflow.dag_processing.dagbag import DagBag  # Airflow 3
except ImportError:  # Airflow 2
    from airflow.models.dagbag import DagBag

folder, ds = sys.argv[1], sys.argv[2]
bag = DagBag(dag_folder=folder)
out = {
    "import_errors": {k: str(v) for k, v in bag.import_errors.items()},
    "dag_ids": sorted(bag.dag_ids),
}
dag = bag.dags.get("eagle_daily")
if dag is not None:
    task = dag.get_task("pipeline")
    context = {"ds": ds, "ds_nodash": ds.replace("-", "")}
    out.update(
        {
            "operator": type(task).__name__,
            "retries": task.retries,
            "retry_delay_s": task.retry_delay.total_seconds(),
            "application": task.application,
            "args": task.render_template(task.application_args, context),
            "name": task.render_template(task.name, context),
            "conf": task.conf,
            "schedule": str(dag.schedule),
            "max_active_runs": dag.max_active_runs,
            "catchup": dag.catchup,
            "task_ids": sorted(t.task_id for t in dag.tasks),
        }
    )
print(json.dumps(out, default=str))
