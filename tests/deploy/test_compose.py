"""docker-compose.yml cannot run here (no Docker engine): parse it and check what it would start."""

import yaml

from tests.conftest import ROOT


def load():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def test_roles_images_and_commands():
    services = load()
    assert set(services) == {"spark-master", "spark-worker-1", "spark-worker-2", "submit"}
    assert {s["image"] for s in services.values()} == {
        "eagle-spark:local"
    }  # one image: same Python
    assert services["spark-master"]["build"] == "."
    master = services["spark-master"]["command"]
    assert master[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert master[master.index("--port") + 1] == "7077"
    for name in ("spark-worker-1", "spark-worker-2"):
        cmd = services[name]["command"]
        assert cmd[:3] == [
            "spark-class",
            "org.apache.spark.deploy.worker.Worker",
            "spark://spark-master:7077",
        ]
        assert "spark-master" in services[name]["depends_on"]
    submit = services["submit"]["command"]
    assert (
        submit[0] == "spark-submit"
        and submit[submit.index("--master") + 1] == "spark://spark-master:7077"
    )
    job = next(a for a in submit if a.startswith("jobs/"))
    assert (ROOT / job).exists()
    conf = submit[submit.index("--conf", submit.index(job)) + 1]
    assert (ROOT / conf).exists()
    assert "spark.loopback=false" in submit  # the driver must be reachable from other containers


def test_ports_and_volumes():
    services = load()
    assert "7077:7077" in services["spark-master"]["ports"]
    assert "8080:8080" in services["spark-master"]["ports"]
    host_ports = [p.split(":")[0] for s in services.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports))  # no clash on the host
    for s in services.values():
        assert "./runs:/data/runs" in s["volumes"]  # same output paths for driver and executors


def test_dockerfile_installs_the_project_and_java():
    text = (ROOT / "Dockerfile").read_text()
    assert "openjdk-17" in text and "pip install" in text
    assert "SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark" in text
    assert "COPY eagle_spark" in text and "COPY jobs" in text and "COPY conf" in text
