"""A real Spark standalone cluster on 127.0.0.1: master + two workers started with the pyspark
package's own ``spark-class``, the pipeline submitted with ``spark-submit`` with GRLR on the joined
path (``embed.x_access=joined``, ``tree.x_access=joined``), one worker SIGKILLed while GRLR runs. The job must finish, and its
assignments must equal a local-mode run's on the cached path.

Every process the test starts is stopped by PID at the end (with the descendants it saw)."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ITERATIONS = 60  # long enough for the kill to land inside GRLR, short enough for CI


def _json(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=2) as r:
            return json.loads(r.read())
    except (OSError, ValueError):  # not up yet, or not a Spark daemon's JSON
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


def _logged_port(procs: "Processes", name: str, service: str, proc) -> int:
    """The port a daemon started with port 0 bound for `service`, read from its log ("Successfully
    started service '<service>' on port N"): a port picked before the daemon starts can be taken in
    between (Spark then moves to the next port, and the probe would talk to another server)."""
    pattern = re.compile(rf"Successfully started service '{service}' on port (\d+)")
    found: list[int] = []

    def bound() -> bool:
        m = pattern.search((procs.logs / f"{name}.log").read_text(errors="replace"))
        if m:
            found.append(int(m.group(1)))
        return bool(found)

    _wait(bound, 90, f"{name}'s {service} port", [proc])
    return found[0]


def _start_master(procs: "Processes", env: dict, spark_home: str) -> tuple[int, int]:
    """A standalone master on 127.0.0.1, ports of its own choosing; returns (port, web UI port)
    once the web UI answers with this master's JSON."""
    master = procs.start(
        "master",
        [
            os.path.join(spark_home, "bin", "spark-class"),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--webui-port",
            "0",
        ],
        env,
    )
    port = _logged_port(procs, "master", "sparkMaster", master)
    ui = _logged_port(procs, "master", "MasterUI", master)
    url = f"spark://127.0.0.1:{port}"
    _wait(lambda: (_json(ui) or {}).get("url") == url, 90, "the master's web UI", [master])
    return port, ui


def _start_worker(
    procs: "Processes",
    env: dict,
    spark_home: str,
    name: str,
    port: int,
    cores: int,
    memory: str,
    work: pathlib.Path,
) -> tuple[subprocess.Popen, int]:
    """A worker of the master at `port` (`cores` cores, `memory`, work dir `work`), web UI on a
    port of its own choosing; returns (its process, its web UI port)."""
    work.mkdir()
    worker = procs.start(
        name,
        [
            os.path.join(spark_home, "bin", "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            f"spark://127.0.0.1:{port}",
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--webui-port",
            "0",
            "--work-dir",
            str(work),
        ],
        env,
    )
    return worker, _logged_port(procs, name, "WorkerUI", worker)


class Processes:
    """The processes this test starts; stop() ends them and the descendants seen, by PID."""

    def __init__(self, logs: pathlib.Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen] = []
        self.seen: dict[int, psutil.Process] = {}

    def start(self, name: str, args: list[str], env: dict) -> subprocess.Popen:
        """Start `args`; stderr goes to <name>.log, stdout to <name>.out."""
        err, out = open(self.logs / f"{name}.log", "wb"), open(self.logs / f"{name}.out", "wb")
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, cwd=ROOT)
        err.close()
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


def _cluster_env() -> tuple[str, dict]:
    """(SPARK_HOME of the pyspark package, the environment of the cluster's processes: bound to
    127.0.0.1, executors and driver on this Python)."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return spark_home, env


def _spark_submit(spark_home: str, port: int) -> list[str]:
    """spark-submit to the test's master, driver on 127.0.0.1, executors on this Python, no UI."""
    return [
        os.path.join(spark_home, "bin", "spark-submit"),
        "--master",
        f"spark://127.0.0.1:{port}",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.ui.enabled=false",
    ]


@pytest.mark.slow
def test_pipeline_on_standalone_cluster_survives_a_lost_worker(spark, tmp_path):

    from eagle_spark.grlr.embedding import embed
    from eagle_spark.settings import Settings

    spark_home, env = _cluster_env()
    run = tmp_path / "run"
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = Processes(logs)
    try:
        port, ui = _start_master(procs, env, spark_home)
        started = [
            _start_worker(
                procs, env, spark_home, f"worker{i}", port, 1, "3g", tmp_path / f"work{i}"
            )
            for i in range(2)
        ]
        workers = [w for w, _ in started]
        ui_workers = [wui for _, wui in started]
        _wait(
            lambda: (_json(ui) or {}).get("aliveworkers") == 2,
            90,
            "two alive workers",
            [*procs.started],
        )

        submit = procs.start(
            "submit",
            [
                *_spark_submit(spark_home, port),
                "--conf",
                "spark.task.maxFailures=8",
                "--executor-memory",
                "2g",
                str(ROOT / "jobs" / "pipeline.py"),
                "--conf",
                str(ROOT / "conf" / "cluster.yaml"),
                "--set",
                f"pipeline.output={run}",
                "--set",
                f"embed.iterations={ITERATIONS}",
                "--set",
                "embed.x_access=joined",
                "--set",
                "tree.x_access=joined",
            ],
            env,
        )

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
        # under spark-submit the job's JSON summary is the only line on stdout (logs go to stderr)
        stdout = (logs / "submit.out").read_text().splitlines()
        assert len(stdout) == 1 and json.loads(stdout[0])["command"] == "pipeline", stdout[:5]
    finally:
        procs.stop()
    for p in procs.started:
        assert p.poll() is not None

    # GRLR ran on the joined path on the cluster (no executor read all of X); the same embed +
    # assign in local mode on the cached path, on the same groups, gives the same assignments
    assert (
        json.loads((run / "embeddings" / "eagle" / "_manifest.json").read_text())["x_access"]
        == "joined"
    )
    settings = Settings.load(
        str(ROOT / "conf" / "cluster.yaml"), [f"embed.iterations={ITERATIONS}"]
    )
    agg = str(run / "data" / "aggregated")
    embed(spark, agg, str(tmp_path / "emb_local"), settings.embed)
    # assign.weighting=auto (conf/cluster.yaml) chooses with a proxy classifier: through the API,
    # which runs the selection, here locally on the cached path
    from eagle_spark.ml import Dataset, GRLRModel

    GRLRModel.fromSettings(settings.assign).atFolder(str(tmp_path / "emb_local")).transformDataset(
        Dataset.at(spark, agg), str(tmp_path / "assigned_local")
    )
    chosen = [
        json.loads((folder / "_manifest.json").read_text())["selection"]["chosen"]
        for folder in (run / "assigned" / "eagle", tmp_path / "assigned_local")
    ]
    assert chosen[0] == chosen[1]
    cols = ["group_id", "label_id", "sample_id"]
    cluster_rows = (
        spark.read.parquet(str(run / "assigned" / "eagle" / "assignments")).select(*cols).collect()
    )
    local_rows = (
        spark.read.parquet(str(tmp_path / "assigned_local" / "assignments")).select(*cols).collect()
    )
    assert len(cluster_rows) > 200_000
    assert sorted(map(tuple, cluster_rows)) == sorted(map(tuple, local_rows))
    # the label trees were trained on the joined path too (each task received its units' rows
    # through a join); trained again in local mode on the cached path: the same trees and weights
    model = run / "models" / "eagle"
    assert json.loads((model / "metadata.json").read_text())["x_access"] == "joined"
    from dataclasses import replace

    from eagle_spark.classifiers.tree import train_tree

    local_model = tmp_path / "tree_local"
    train_tree(
        spark,
        str(run / "assigned" / "eagle"),
        str(local_model),
        replace(settings.tree, x_access="cached"),
    )
    for table in sorted(p.name for p in (model / "data").iterdir()):
        got = sorted(map(tuple, spark.read.parquet(str(model / "data" / table)).collect()))
        want = sorted(map(tuple, spark.read.parquet(str(local_model / "data" / table)).collect()))
        assert got == want, table


def _start_cluster(procs: Processes, tmp_path: pathlib.Path, env: dict, spark_home: str) -> int:
    """Master + one 2-core worker; returns the master's port."""
    port, ui = _start_master(procs, env, spark_home)
    _start_worker(procs, env, spark_home, "worker", port, 2, "4g", tmp_path / "work")
    _wait(
        lambda: (_json(ui) or {}).get("aliveworkers") == 1, 90, "an alive worker", [*procs.started]
    )
    return port


@pytest.mark.slow
def test_jobs_readme_recipes_ship_the_library_zip_and_the_packed_environment(
    spark, delicious, tmp_path
):
    """jobs/README.md's two ways to get eagle_spark to executors that do not have it, on a real
    standalone cluster: (1) the library as a zip with --py-files, the dependencies installed on the
    node; (2) the whole environment packed with venv-pack2 and shipped with --archives, executors
    running ./environment/bin/python. Both embed runs equal a local-mode embed."""
    import pyspark

    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.settings import AggregateSettings, EmbedSettings

    agg = str(tmp_path / "r4")
    aggregate(spark, delicious, agg, AggregateSettings(group_size=4))
    embed(spark, agg, str(tmp_path / "emb_local"), EmbedSettings(iterations=3))

    # the recipes' build steps, as jobs/README.md writes them
    clean = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"
    }  # the new environment's own paths only
    envdir, dist = tmp_path / "environment", tmp_path / "dist"
    dist.mkdir()
    subprocess.run(
        [sys.executable, "-m", "zipfile", "-c", str(dist / "eagle_spark.zip"), "eagle_spark"],
        cwd=ROOT,
        check=True,
    )
    # --copies: the interpreter as a file, not a link to an absolute path (Spark refuses to unpack
    # an archive entry that points outside the folder it unpacks into)
    subprocess.run([sys.executable, "-m", "venv", "--copies", str(envdir)], check=True)
    pip = [str(envdir / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run(
        [*pip, str(ROOT)], check=True, stdout=subprocess.DEVNULL, env=clean
    )  # the library + its deps
    subprocess.run(
        [
            sys.executable,
            "-m",
            "venv_pack",
            "-p",
            str(envdir),
            "-o",
            str(dist / "environment.tar.gz"),
            "--compress-level",
            "1",
            "--exclude",
            "lib/python3*/site-packages/pyspark/jars/*",
            "--quiet",
        ],
        check=True,
    )
    # a node with the dependencies but not the library, for the --py-files recipe
    subprocess.run(
        [str(envdir / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "eagle_spark"],
        check=True,
        env=clean,
    )
    probe = subprocess.run(
        [str(envdir / "bin" / "python"), "-c", "import eagle_spark"],
        capture_output=True,
        cwd=tmp_path,
        env=clean,
    )  # not the checkout, whose folder would be on the path
    assert probe.returncode != 0  # so executors can only get it from the zip

    spark_home = os.path.dirname(pyspark.__file__)
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    for name in ("PYSPARK_GATEWAY_PORT", "PYTHONPATH", "PYSPARK_PYTHON"):
        env.pop(name, None)  # executors see only what the recipe ships
    procs = Processes(tmp_path)
    outputs = {}
    try:
        port = _start_cluster(procs, tmp_path, env, spark_home)
        submit = [
            os.path.join(spark_home, "bin", "spark-submit"),
            "--master",
            f"spark://127.0.0.1:{port}",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.driver.bindAddress=127.0.0.1",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            "--conf",
            "spark.ui.enabled=false",
            "--executor-memory",
            "2g",
        ]
        recipes = {
            "py_files": [
                "--conf",
                f"spark.pyspark.python={envdir}/bin/python",
                "--py-files",
                str(dist / "eagle_spark.zip"),
            ],
            "archives": [
                "--conf",
                "spark.pyspark.python=./environment/bin/python",
                "--archives",
                f"{dist / 'environment.tar.gz'}#environment",
            ],
        }
        for name, flags in recipes.items():
            out, summary = tmp_path / f"emb_{name}", tmp_path / f"{name}.json"
            job = procs.start(
                f"submit_{name}",
                [
                    *submit,
                    *flags,
                    str(ROOT / "jobs" / "embed.py"),
                    "--input",
                    agg,
                    "--output",
                    str(out),
                    "--iterations",
                    "3",
                    "--summary",
                    str(summary),
                    "--conf",
                    str(ROOT / "conf" / "cluster.yaml"),
                ],
                env,
            )
            assert job.wait(timeout=900) == 0, (tmp_path / f"submit_{name}.log").read_text()[-4000:]
            outputs[name] = (out, json.loads(summary.read_text()))
            assert (
                tmp_path / f"submit_{name}.out"
            ).read_text() == ""  # --summary: nothing on stdout
    finally:
        procs.stop()
    want = sorted(
        map(tuple, spark.read.parquet(str(tmp_path / "emb_local" / "label_emb")).collect())
    )
    for name, (out, summary) in outputs.items():
        assert summary["command"] == "embed" and summary["n_labels"] == 983, name
        got = sorted(map(tuple, spark.read.parquet(str(out / "label_emb")).collect()))
        assert got == want, name


MIML_SCRIPT = """
import json, sys
import numpy as np
from pyspark.sql import SparkSession
from eagle_spark.data import mnist_sample
from eagle_spark.miml.data import Bags, centre, load_mnist, make_bags
from eagle_spark.miml.training import NetConfig, train_bags
from eagle_spark.ml.miml import DeepMIML, collect_bags

spark = SparkSession.builder.getOrCreate()
train, _ = load_mnist(mnist_sample())
x = centre(train.x[:512])[0]
bags = make_bags(train.y[:512], 4, seed=0)
rows = [
    (f"bag-{b:04d}", x[i].tolist(), [int(k) for k in np.repeat(np.arange(10), c)])
    for b, (m, c) in enumerate(zip(bags.members, bags.counts))
    for i in m
]
from pyspark.ml.functions import array_to_vector
df = spark.createDataFrame(rows, ["group_id", "pixels", "group_labels"]).withColumn(
    "features", array_to_vector("pixels")
)
small = dict(hidden=16, concepts=2, epochs=2, seed=1)
model = DeepMIML(method="deep-miml", numProcesses=2, localMode=False, batchSize=16, **small).fit(df)
xf, bf = collect_bags(df, "features", "group_id", "group_labels")
one, hist = train_bags(xf, bf, NetConfig(hidden=16, concepts=2, epochs=2, seed=1, batch_size=32))
got = model.state()
json.dump(
    {
        "names": sorted(got) == sorted(one),
        "max_diff": max(float(np.abs(got[k] - one[k]).max(initial=0.0)) for k in one),
        "losses": [h["loss"] for h in model.history],
        "one_losses": [h["loss"] for h in hist],
        "predicted": model.transform(df).where("prediction IS NOT NULL").count(),
    },
    open(sys.argv[1], "w"),
)
spark.stop()
"""


@pytest.mark.slow
def test_miml_estimator_trains_through_torch_distributor_on_the_cluster(tmp_path):
    """DeepMIML with numProcesses=2 and localMode=False: TorchDistributor's barrier job runs the
    two DDP processes in the executors of a real standalone cluster (one 2-core worker); the network
    equals one process trained with the doubled batch over the same bag order (as in local mode,
    tests/unit/test_miml.py), and the model scores every row."""
    pytest.importorskip("torch", reason="the [miml] extra (PyTorch) is not installed")

    spark_home, env = _cluster_env()
    script, result = tmp_path / "miml_cluster.py", tmp_path / "result.json"
    script.write_text(MIML_SCRIPT)
    procs = Processes(tmp_path)
    try:
        port = _start_cluster(procs, tmp_path, env, spark_home)
        submit = procs.start(
            "submit",
            [
                *_spark_submit(spark_home, port),
                "--executor-memory",
                "2g",
                str(script),
                str(result),
            ],
            env,
        )
        assert submit.wait(timeout=900) == 0, (tmp_path / "submit.log").read_text()[-4000:]
    finally:
        procs.stop()
    found = json.loads(result.read_text())
    # TorchDistributor's own line for local_mode=False (local mode says "local training")
    assert (
        "Started distributed training with 2 executor processes"
        in (tmp_path / "submit.out").read_text()
    )
    assert found["names"] and found["max_diff"] < 1e-4, found
    assert found["losses"] == pytest.approx(found["one_losses"], rel=1e-5)
    assert found["predicted"] == 512
