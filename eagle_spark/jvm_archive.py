"""The driver JVM's class archive: Spark's classes mapped from one file at start instead of loaded
and verified one by one, by the JVM's own class data sharing (CDS, ``-XX:SharedArchiveFile``).

Every command starts a JVM, which loads some 15,000 classes of Spark before its first job; with an
archive of them a session is up ~2 s sooner and its first Spark jobs run ~1 s sooner
(``benchmarks/main_job.py`` and ``benchmarks/peers.py --whole-command`` time whole commands).

The archive is made once per machine and per install (the key: the ``java`` that Spark runs, the
JDK's class image and every jar of Spark, by path, size and modification time), in the folder of
the setting ``spark.class_archive`` (``auto``: ``$XDG_CACHE_HOME/eagle_spark``, else
``~/.cache/eagle_spark``; about 180 MB):

* A session that finds no archive for its key starts one maker (:func:`start_maker`) in the
  background, at the lowest CPU priority, and runs without: a detached ``python -m
  eagle_spark.jvm_archive FOLDER``, which runs a short Spark job (:data:`WORKLOAD`) under
  ``spark-submit`` with ``-XX:ArchiveClassesAtExit`` (the JVM writes the archive as it exits; ~30 s
  of CPU), then commits it: the archive under its final name, then its record (size, key), each by
  an atomic rename. One maker per key at a time (a lock file naming its process); a maker that
  fails leaves ``<name>.failed`` with the reason, and no session tries again until it is deleted.
* A session that finds one uses it only when its record names the same key and the file has the
  recorded size (a truncated archive would crash the JVM as it maps it); the JVM itself then checks
  the archive's checksums (``-XX:+VerifySharedSpaces``) and its match to the running JDK and class
  path, and falls back to loading the classes one by one with a warning on stderr when they do not
  match. The JVM's own warnings go to stderr (``-Xlog``): a command's standard output is its
  summary.

Only the driver of a classic session this library starts takes the archive: not a session under
``spark-submit`` (its JVM was started before), not a Spark Connect one, not the executors of a
cluster. The options are added after ``spark.driver.extraJavaOptions`` given in ``spark.extra``;
when those already name an archive (``-XX:SharedArchiveFile``, ``-Xshare``), nothing is added.

Source: this project (the JVM's start-up), beyond the paper. The JVM options are HotSpot's
(JDK 13 and later; measured on OpenJDK 17).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Optional

log = logging.getLogger("eagle_spark.jvm_archive")  # the same name when run as __main__

FORMAT = 1
"""The archive record's format (a record of another format is not used)."""

LOG_OPTIONS = ("-Xlog:disable", "-Xlog:all=warning:stderr")
"""The JVM's own warnings and errors on stderr instead of stdout (HotSpot's default)."""

USE_OPTIONS = ("-XX:+VerifySharedSpaces",)
"""With the archive: the JVM checks its regions' checksums before it uses it."""

MAKE_SECONDS = 600.0
"""The longest a maker waits for its ``spark-submit`` run."""

WORKLOAD = """
import sys, tempfile
from pyspark.sql import SparkSession, Window, functions as F
spark = SparkSession.builder.getOrCreate()
rows = spark.range(3000).select(
    (F.col("id") % 17).alias("k"), F.array(F.col("id").cast("int")).alias("a"),
    F.rand(1).cast("float").alias("v"))
with tempfile.TemporaryDirectory() as tmp:
    rows.write.parquet(tmp + "/p")
    back = spark.read.parquet(tmp + "/p")
    ranked = back.withColumn("r", F.dense_rank().over(Window.orderBy("k")))
    joined = ranked.groupBy("k").agg(F.count("*"), F.collect_list("a"), F.avg("v")).join(back, "k")
    joined.write.mode("overwrite").parquet(tmp + "/q")
    spark.read.parquet(tmp + "/q").sort("k").limit(5).collect()
    def same(batches):
        yield from batches
    back.mapInArrow(same, back.schema).agg(F.sum("k")).collect()
    back.toArrow()
spark.stop()
"""
"""The Spark job the archive is made from: what the library's commands do (Parquet in and out,
joins, aggregations, windows, Arrow batches through Python workers). Classes it does not load are
loaded as before."""


def default_folder() -> pathlib.Path:
    """``$XDG_CACHE_HOME/eagle_spark``, else ``~/.cache/eagle_spark``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "eagle_spark"


def folder_of(setting: Optional[str]) -> Optional[pathlib.Path]:
    """The archive folder of the setting ``spark.class_archive``: None (off) for null or ``none``,
    :func:`default_folder` for ``auto``, else the folder given."""
    if setting is None or setting.strip().lower() == "none":
        return None
    if setting.strip().lower() == "auto":
        return default_folder()
    return pathlib.Path(setting).expanduser()


def spark_home() -> pathlib.Path:
    """The Spark that pyspark starts: ``$SPARK_HOME``, else the pyspark package's folder."""
    import pyspark

    return pathlib.Path(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__))


def java_binary() -> Optional[pathlib.Path]:
    """The ``java`` that Spark's launcher runs (``$JAVA_HOME/bin/java``, else ``java`` on PATH),
    with links resolved; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return pathlib.Path(found).resolve() if found and os.path.exists(found) else None


def _stamp(path: pathlib.Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def archive_key(java: pathlib.Path, home: pathlib.Path) -> str:
    """The key an archive is valid for: sha256 of the ``java`` binary's and the JDK's class image
    (``lib/modules``) path, size and modification time, and of every jar of Spark (``home/jars``)
    likewise, sorted by name. An update of the JDK or of Spark changes it.

    Raises:
        OSError: a file cannot be read (no Spark jars, a JDK without its class image).
    """
    parts = [f"format {FORMAT}", _stamp(java)]
    modules = java.parent.parent / "lib" / "modules"
    if modules.exists():
        parts.append(_stamp(modules))
    jars = sorted((home / "jars").glob("*.jar"))
    if not jars:
        raise OSError(f"{home / 'jars'} has no jars")
    parts += [_stamp(j) for j in jars]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _names(folder: pathlib.Path, key: str) -> dict[str, pathlib.Path]:
    stem = f"spark-{key[:16]}"
    return {
        "archive": folder / f"{stem}.jsa",
        "record": folder / f"{stem}.json",
        "lock": folder / f"{stem}.making",
        "failed": folder / f"{stem}.failed",
    }


def usable_archive(folder: pathlib.Path, key: str) -> Optional[pathlib.Path]:
    """The archive of `key` in `folder` when its record is complete and matches: same format and
    key, and the file has the recorded size; else None (a damaged record or archive is logged)."""
    names = _names(folder, key)
    try:
        record = json.loads(names["record"].read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("class archive: record %s is unreadable (%s); not used", names["record"], err)
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != key:
        log.warning(
            "class archive: record %s is for another key or format; not used", names["record"]
        )
        return None
    try:
        size = names["archive"].stat().st_size
    except OSError:
        size = -1
    if size != record.get("bytes"):
        log.warning(
            "class archive: %s has %d bytes, its record says %s; not used (delete %s and %s to "
            "make it again)",
            names["archive"],
            size,
            record.get("bytes"),
            names["archive"],
            names["record"],
        )
        return None
    return names["archive"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _held(lock: pathlib.Path) -> bool:
    """Whether `lock` exists and names a running process."""
    try:
        holder = int(lock.read_text().strip() or 0)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        holder = 0
    return bool(holder) and _alive(holder)


def _take_lock(lock: pathlib.Path) -> bool:
    """Create `lock` naming this process; a lock whose process has ended is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _held(lock):
                return False
            lock.unlink(missing_ok=True)  # its maker ended without removing it
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        return True
    return False


def start_maker(folder: pathlib.Path, key: str) -> None:
    """Start the background maker of `key`'s archive in `folder` (:func:`make_archive` in a
    detached process at the lowest CPU priority), unless one runs or one failed before."""
    names = _names(folder, key)
    if names["failed"].exists():
        log.info(
            "class archive: making it failed before (%s); delete that file to try again",
            names["failed"],
        )
        return
    if _held(names["lock"]):  # a maker runs (a stale lock is taken over by the next one)
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        logfile = open(folder / "maker.log", "ab")  # noqa: SIM115 - handed to the child
    except OSError as err:
        log.warning("class archive: cannot write to %s (%s); running without", folder, err)
        return
    with logfile:
        subprocess.Popen(
            [sys.executable, "-m", "eagle_spark.jvm_archive", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=logfile,
            stderr=logfile,
            start_new_session=True,  # not stopped with this command's process group
            close_fds=True,
        )
    log.info("class archive: making one in %s in the background (once per install)", folder)


def make_archive(folder: pathlib.Path) -> Optional[pathlib.Path]:
    """Make and commit the archive of this install's key in `folder` (see the module docstring);
    None when another maker holds the lock or one exists already.

    Raises:
        RuntimeError: no ``java`` or Spark, or the ``spark-submit`` run failed or wrote nothing
            (the reason is also written to ``<name>.failed``).
    """
    home, java = spark_home(), java_binary()
    if java is None:
        raise RuntimeError("no java: set JAVA_HOME or put java on PATH")
    key = archive_key(java, home)
    names = _names(folder, key)
    folder.mkdir(parents=True, exist_ok=True)
    if usable_archive(folder, key) is not None or not _take_lock(names["lock"]):
        return None
    tmp = names["archive"].with_name(f"{names['archive'].name}.tmp-{os.getpid()}")
    record_tmp = names["record"].with_name(f"{names['record'].name}.tmp-{os.getpid()}")
    script = folder / f"workload-{os.getpid()}.py"
    try:
        script.write_text(WORKLOAD)
        options = " ".join([f"-XX:ArchiveClassesAtExit={tmp}", *USE_OPTIONS, *LOG_OPTIONS])
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        t0 = time.monotonic()
        command = [
            str(home / "bin" / "spark-submit"),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--driver-java-options",
            options,
            str(script),
        ]
        try:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=MAKE_SECONDS
            )
        except subprocess.TimeoutExpired as err:
            names["failed"].write_text(f"spark-submit ran longer than {MAKE_SECONDS:g} s")
            raise RuntimeError(
                f"class archive: spark-submit ran longer than {MAKE_SECONDS:g} s"
            ) from err
        if done.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            why = (
                f"spark-submit exited {done.returncode}; archive "
                f"{'written' if tmp.exists() else 'not written'}\n{done.stderr[-3000:]}"
            )
            names["failed"].write_text(why)
            raise RuntimeError(f"class archive: {why}")
        record = {
            "format": FORMAT,
            "key": key,
            "bytes": tmp.stat().st_size,
            "java": str(java),
            "spark_home": str(home),
            "seconds": round(time.monotonic() - t0, 1),
        }
        os.replace(tmp, names["archive"])
        record_tmp.write_text(json.dumps(record, indent=1))
        os.replace(record_tmp, names["record"])
        for old in folder.glob("spark-*.jsa"):  # archives of earlier installs
            if old != names["archive"]:
                old.unlink(missing_ok=True)
                old.with_suffix(".json").unlink(missing_ok=True)
        return names["archive"]
    finally:
        for leftover in (tmp, record_tmp, script):  # none is left after a commit or a failure
            leftover.unlink(missing_ok=True)
        names["lock"].unlink(missing_ok=True)


def driver_options(setting: Optional[str], given: str = "") -> list[str]:
    """The JVM options that make the driver use this install's archive (the setting
    ``spark.class_archive``), to add after `given` (``spark.driver.extraJavaOptions`` from the
    user); [] when the setting is off, `given` names an archive, there is no ``java`` or Spark
    to key it on, the archive is not made yet (its maker is then started: :func:`start_maker`)
    or it does not match its record (logged; deleting both makes it again).
    """
    folder = folder_of(setting)
    if folder is None or "SharedArchiveFile" in given or "-Xshare" in given:
        return []
    java = java_binary()
    if java is None:
        return []
    try:
        key = archive_key(java, spark_home())
    except OSError as err:
        log.info("class archive: not used (%s)", err)
        return []
    archive = usable_archive(folder, key)
    if archive is None:
        if not _names(folder, key)["record"].exists():  # a damaged one is logged, not remade
            start_maker(folder, key)
        return []
    return [f"-XX:SharedArchiveFile={archive}", *USE_OPTIONS, *LOG_OPTIONS]


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m eagle_spark.jvm_archive FOLDER``: make the archive in FOLDER, at the lowest CPU
    priority; exit 0 when it exists afterwards, 1 on failure."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m eagle_spark.jvm_archive FOLDER", file=sys.stderr)
        return 2
    os.nice(19)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        made = make_archive(pathlib.Path(args[0]))
    except (OSError, RuntimeError) as err:
        log.error("%s", err)
        return 1
    log.info("class archive: %s", made or "made by another process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
