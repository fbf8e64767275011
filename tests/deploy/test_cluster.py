"""A real Spark standalone cluster on 127.0.0.1: master + two workers started with the pyspark
package's own ``spark-class``, the pipeline submitted with ``spark-submit`` with GRLR on the joined
path (``embed.x_access=joined``), one worker SIGKILLed while GRLR runs. The job must finish, and its
assignments must equal a local-mode run's on the cached path.

Every process the test starts is stopped by PID at the end (with the descendants it saw)."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ITERATIONS = 60  # long enough for the kill to land inside GRLR, short enough for CI


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _json(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


def _wait(predicate, timeout: float, what: str, procs: list) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: process {p.args[:2]} exited with {p.returncode}")
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Processes:
    """The processes this test starts; stop() ends them and the descendants seen, by PID."""

    def __init__(self, logs: pathlib.Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen] = []
        self.seen: dict[int, psutil.Process] = {}

    def start(self, name: str, args: list[str], env: dict) -> subprocess.Popen:
        out = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        out.close()
        self.started.append(proc)
        return proc

    def note_descendants(self) -> None:
        for p in self.started:
            try:
                for child in psutil.Process(p.pid).children(recursive=True):
                    self.seen[child.pid] = child
            except psutil.Error:
                pass

    def stop(self) -> None:
        self.note_descendants()
        for p in reversed(self.started):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.started:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for child in self.seen.values():
            try:
                if child.is_running():
                    child.kill()
            except psutil.Error:
                pass


def _log_time(line: str) -> float:
    stamp = " ".join(line.split()[:2])
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


@pytest.mark.slow
def test_pipeline_on_standalone_cluster_survives_a_lost_worker(spark, tmp_path):
    import pyspark

    from eagle_spark.assignment.assign import assign
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.params import Settings

    spark_home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    port, ui = _free_port(), _free_port()
    ui_workers = [_free_port(), _free_port()]
    run = tmp_path / "run"
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = Processes(logs)
    try:
        master = procs.start("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                        "--host", "127.0.0.1", "--port", str(port),
                                        "--webui-port", str(ui)], env)
        _wait(lambda: _json(ui) is not None, 90, "the master's web UI", [master])
        workers = []
        for i, wui in enumerate(ui_workers):
            (tmp_path / f"work{i}").mkdir()
            workers.append(procs.start(f"worker{i}", [
                spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                "--host", "127.0.0.1", "--cores", "1", "--memory", "3g", "--webui-port", str(wui),
                "--work-dir", str(tmp_path / f"work{i}")], env))
        _wait(lambda: (_json(ui) or {}).get("aliveworkers") == 2, 90, "two alive workers", [master, *workers])

        submit = procs.start("submit", [
            os.path.join(spark_home, "bin", "spark-submit"), "--master", f"spark://127.0.0.1:{port}",
            "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.ui.enabled=false",
            "--conf", "spark.task.maxFailures=8", "--executor-memory", "2g",
            str(ROOT / "jobs" / "pipeline.py"), "--conf", str(ROOT / "conf" / "cluster.yaml"),
            "--set", f"pipeline.output={run}", "--set", f"embed.iterations={ITERATIONS}",
            "--set", "embed.x_access=joined"], env)

        def log_text() -> str:  # the run's own log, logs/<run id>.log
            found = sorted((run / "logs").glob("*.log")) if (run / "logs").exists() else []
            return found[0].read_text() if found else ""

        def grlr_running() -> bool:
            return "stage embed_eagle: start" in log_text()

        _wait(grlr_running, 600, "the GRLR stage to start", [submit])
        time.sleep(2.0)
        executors = [(_json(w) or {}).get("executors", []) for w in ui_workers]
        assert all(executors), f"both workers should run an executor: {executors}"
        procs.note_descendants()
        workers[0].send_signal(signal.SIGKILL)  # the worker JVM; its executor follows it
        killed_at = time.time()
        workers[0].wait(timeout=30)

        assert submit.wait(timeout=1200) == 0, (logs / "submit.log").read_text()[-4000:]
        text = log_text()
        done = [line for line in text.splitlines() if "stage embed_eagle: done" in line]
        assert done and _log_time(done[0]) > killed_at, "the worker was not lost while GRLR ran"
        assert (_json(ui) or {}).get("aliveworkers") == 1
        assert (run / "comparison.json").exists() and (run / "report.json").exists()
    finally:
        procs.stop()
    for p in procs.started:
        assert p.poll() is not None

    # GRLR ran on the joined path on the cluster (no executor read all of X); the same embed +
    # assign in local mode on the cached path, on the same groups, gives the same assignments
    assert json.loads((run / "embeddings" / "eagle" / "_manifest.json").read_text())["x_access"] == "joined"
    settings = Settings.load(str(ROOT / "conf" / "cluster.yaml"), [f"embed.iterations={ITERATIONS}"])
    agg = str(run / "data" / "aggregated")
    embed(spark, agg, str(tmp_path / "emb_local"), settings.embed)
    assign(spark, agg, str(tmp_path / "assigned_local"), settings.assign, embeddings=str(tmp_path / "emb_local"))
    cols = ["group_id", "label_id", "sample_id"]
    cluster_rows = spark.read.parquet(str(run / "assigned" / "eagle" / "assignments")).select(*cols).collect()
    local_rows = spark.read.parquet(str(tmp_path / "assigned_local" / "assignments")).select(*cols).collect()
    assert len(cluster_rows) > 200_000
    assert sorted(map(tuple, cluster_rows)) == sorted(map(tuple, local_rows))
