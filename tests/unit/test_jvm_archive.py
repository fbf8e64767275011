"""The driver JVM's class archive (eagle_spark.jvm_archive): its key, the checks before a session
uses it, the maker's commit and failure record, and (slow) a real archive under a real command."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from eagle_spark import jvm_archive as ja

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _fake_install(tmp_path: pathlib.Path, submit: str) -> tuple[pathlib.Path, pathlib.Path]:
    """A Spark home with two jars and `submit` as bin/spark-submit, and a JDK with bin/java and
    lib/modules."""
    home, jdk = tmp_path / "spark", tmp_path / "jdk"
    for folder in (home / "jars", home / "bin", jdk / "bin", jdk / "lib"):
        folder.mkdir(parents=True)
    (home / "jars" / "a.jar").write_bytes(b"a" * 10)
    (home / "jars" / "b.jar").write_bytes(b"b" * 20)
    script = home / "bin" / "spark-submit"
    script.write_text(submit)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (jdk / "bin" / "java").write_bytes(b"java")
    (jdk / "lib" / "modules").write_bytes(b"modules")
    return home, jdk / "bin" / "java"


# writes 1,234 bytes where -XX:ArchiveClassesAtExit says, as the JVM does on exit
WRITES = """#!/bin/sh
for a in "$@"; do
  for o in $a; do
    case "$o" in -XX:ArchiveClassesAtExit=*) head -c 1234 /dev/zero > "${o#*=}";; esac
  done
done
"""
FAILS = "#!/bin/sh\necho 'no JVM here' >&2\nexit 3\n"


@pytest.fixture
def install(tmp_path, monkeypatch):
    def make(submit: str = WRITES):
        home, java = _fake_install(tmp_path, submit)
        monkeypatch.setenv("SPARK_HOME", str(home))
        monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
        return home, java

    return make


def test_folder_of_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ja.folder_of(None) is None and ja.folder_of("none") is None
    assert ja.folder_of("auto") == tmp_path / "eagle_spark"
    assert ja.folder_of("/x/y") == pathlib.Path("/x/y")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ja.folder_of("auto") == pathlib.Path(os.path.expanduser("~")) / ".cache" / "eagle_spark"


def test_the_key_follows_the_jdk_and_every_jar(install):
    home, java = install()
    key = ja.archive_key(java, home)
    assert len(key) == 64 and key == ja.archive_key(java, home)
    (home / "jars" / "b.jar").write_bytes(b"c" * 21)  # an updated jar
    assert ja.archive_key(java, home) != key
    key = ja.archive_key(java, home)
    (java.parent.parent / "lib" / "modules").write_bytes(b"modules, updated")  # an updated JDK
    assert ja.archive_key(java, home) != key
    for jar in (home / "jars").iterdir():
        jar.unlink()
    with pytest.raises(OSError, match="has no jars"):
        ja.archive_key(java, home)


def test_the_maker_commits_the_archive_then_its_record(install, tmp_path):
    home, java = install()
    folder = tmp_path / "cache"
    made = ja.make_archive(folder)
    key = ja.archive_key(java, home)
    assert made == folder / f"spark-{key[:16]}.jsa" and made.stat().st_size == 1234
    record = json.loads(made.with_suffix(".json").read_text())
    assert (record["format"], record["key"], record["bytes"]) == (1, key, 1234)
    assert sorted(p.name for p in folder.iterdir()) == [made.name, made.with_suffix(".json").name]
    assert ja.usable_archive(folder, key) == made
    assert ja.make_archive(folder) is None  # made already: nothing to do
    # a new install (another jar) makes its own archive and removes the old one
    (home / "jars" / "c.jar").write_bytes(b"c")
    newer = ja.make_archive(folder)
    assert newer is not None and newer != made and not made.exists()
    assert not made.with_suffix(".json").exists()


def test_an_archive_is_used_only_as_its_record_says(install, tmp_path, caplog):
    home, java = install()
    folder = tmp_path / "cache"
    made = ja.make_archive(folder)
    key = ja.archive_key(java, home)
    record = made.with_suffix(".json")
    assert ja.usable_archive(folder, "0" * 64) is None  # no record of that key
    made.chmod(0o644)
    with open(made, "r+b") as fh:  # truncated: the JVM would crash mapping it
        fh.truncate(1000)
    with caplog.at_level("WARNING"):
        assert ja.usable_archive(folder, key) is None
    assert "has 1000 bytes, its record says 1234" in caplog.text
    made.write_bytes(b"\0" * 1234)
    assert ja.usable_archive(folder, key) == made
    text = json.loads(record.read_text())
    record.write_text(json.dumps({**text, "key": "other"}))
    assert ja.usable_archive(folder, key) is None
    record.write_text("{not json")
    assert ja.usable_archive(folder, key) is None
    record.unlink()  # an archive without its record: a maker stopped between the two renames
    assert ja.usable_archive(folder, key) is None


def test_a_failed_maker_leaves_its_reason_and_no_archive(install, tmp_path):
    home, java = install(FAILS)
    folder = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="spark-submit exited 3"):
        ja.make_archive(folder)
    key = ja.archive_key(java, home)
    failed = folder / f"spark-{key[:16]}.failed"
    assert "no JVM here" in failed.read_text()
    assert sorted(p.name for p in folder.iterdir()) == [failed.name]  # no lock, no temporary


def test_driver_options(install, tmp_path, monkeypatch):
    home, java = install()
    folder = tmp_path / "cache"
    started = []
    monkeypatch.setattr(ja, "start_maker", lambda f, k: started.append((f, k)))
    assert ja.driver_options(None) == [] and ja.driver_options("none") == []
    assert ja.driver_options(str(folder)) == []  # none made yet: a maker starts
    assert started == [(folder, ja.archive_key(java, home))]
    made = ja.make_archive(folder)
    assert ja.driver_options(str(folder)) == [
        f"-XX:SharedArchiveFile={made}",
        "-XX:+VerifySharedSpaces",
        "-Xlog:disable",
        "-Xlog:all=warning:stderr",
    ]
    # the user's own archive options win
    assert ja.driver_options(str(folder), "-Xshare:off") == []
    assert ja.driver_options(str(folder), "-XX:SharedArchiveFile=/x.jsa") == []
    made.chmod(0o644)
    made.write_bytes(b"short")  # damaged: logged and not used, and not made again by itself
    assert ja.driver_options(str(folder)) == []
    assert len(started) == 1


def test_one_maker_at_a_time(install, tmp_path):
    home, java = install()
    folder = tmp_path / "cache"
    folder.mkdir()
    lock = folder / f"spark-{ja.archive_key(java, home)[:16]}.making"
    lock.write_text(str(os.getpid()))  # a live maker
    assert ja.make_archive(folder) is None and not list(folder.glob("*.jsa"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(str(dead.pid))  # a maker that ended without removing its lock
    assert ja.make_archive(folder) is not None and not lock.exists()


def test_start_maker_respects_a_failure_and_a_running_maker(install, tmp_path, monkeypatch):
    home, java = install()
    folder = tmp_path / "cache"
    folder.mkdir()
    key = ja.archive_key(java, home)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    spawned = []
    monkeypatch.setattr(ja.subprocess, "Popen", lambda *a, **k: spawned.append(a[0]))
    (folder / f"spark-{key[:16]}.failed").write_text("earlier")
    ja.start_maker(folder, key)
    (folder / f"spark-{key[:16]}.failed").unlink()
    (folder / f"spark-{key[:16]}.making").write_text(str(os.getpid()))
    ja.start_maker(folder, key)
    assert spawned == []
    (folder / f"spark-{key[:16]}.making").write_text(str(dead.pid))  # its maker ended
    ja.start_maker(folder, key)
    assert spawned == [[sys.executable, "-m", "eagle_spark.jvm_archive", str(folder)]]


@pytest.mark.slow  # a real archive: a Spark job under spark-submit (~30 s of CPU)
def test_a_real_archive_serves_a_command_and_a_damaged_one_is_refused(tmp_path):
    """The maker's archive under a real command (its stdout the one JSON summary line); a
    bit-flipped archive is refused by the JVM's checksums (a warning on stderr, the command
    runs), a truncated one by its record (never mapped: the JVM would crash).

    The archive is a copy of the one the set-up command's maker left in the default folder when
    that one is usable for this JDK and Spark (the same maker made it; making another costs a
    minute of both cores), else the maker makes one here."""
    folder = tmp_path / "cache"
    java = ja.java_binary()
    assert java is not None, "no java binary: a class archive cannot be made or used"
    key = ja.archive_key(java, ja.spark_home())
    cached = ja.usable_archive(ja.default_folder(), key)
    if cached is not None:
        folder.mkdir()
        shutil.copyfile(cached.with_suffix(".json"), folder / cached.with_suffix(".json").name)
        shutil.copyfile(cached, folder / cached.name)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "eagle_spark.jvm_archive", str(folder)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    (made,) = folder.glob("spark-*.jsa")
    assert ja.usable_archive(folder, key) == made
    command = [
        sys.executable,
        "-m",
        "eagle_spark.cli",
        "--log-level",
        "INFO",
        "ingest",
        "--output",
        str(tmp_path / "out"),
        "--overwrite",
        "--set",
        "spark.master=local[1]",
        "--set",
        f"spark.class_archive={folder}",
    ]

    def run() -> subprocess.CompletedProcess:
        ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert json.loads(ran.stdout)["n_samples"] == 12920  # stdout: the summary alone
        return ran

    ran = run()
    assert "cds" not in ran.stderr.lower()
    made.chmod(0o644)
    with open(made, "r+b") as fh:
        fh.seek(made.stat().st_size // 2)
        fh.write(b"\xff" * 64)
    ran = run()
    assert "Unable to use shared archive" in ran.stderr
    with open(made, "r+b") as fh:
        fh.truncate(made.stat().st_size // 2)
    ran = run()
    assert "its record says" in ran.stderr and "Unable to use" not in ran.stderr
