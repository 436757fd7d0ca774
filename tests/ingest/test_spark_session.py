"""The load's Spark session (ingest/spark_runner.py): its Python worker daemon
(ingest/spark_daemon.py: which pyspark.zip it drops from the path, and that a real
application's workers then import PySpark from the installed package), and its JVMs'
options, kept out of the way of a submission that sets its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from broker.processes import ROOT
from ingest.spark_daemon import prefer_installed_pyspark
from ingest.spark_runner import JVM_OPTIONS, spark_session
from ingest.spark_standalone import spark_env, spark_home

INSTALLED = Path(pyspark.__file__).parent  # site-packages/pyspark
ZIP = str(INSTALLED / "python" / "lib" / "pyspark.zip")
SITE = str(INSTALLED.parent)


def test_the_installed_packages_own_zip_is_dropped_when_the_package_is_on_the_path():
    py4j = str(INSTALLED / "python" / "lib" / "py4j-src.zip")
    assert prefer_installed_pyspark([ZIP, py4j, "/user/files.zip", SITE]) == [
        py4j,
        "/user/files.zip",
        SITE,
    ]


def test_other_zips_stay():
    # Not on the path as a package: nothing else could import pyspark.
    assert prefer_installed_pyspark([ZIP, "/other"]) == [ZIP, "/other"]
    # A Spark distribution's zip ($SPARK_HOME/python/lib) is not inside a package.
    spark_home = "/opt/spark/python/lib/pyspark.zip"
    assert prefer_installed_pyspark([spark_home, SITE]) == [spark_home, SITE]
    assert prefer_installed_pyspark(["/tmp/pyspark.zip", SITE]) == ["/tmp/pyspark.zip", SITE]


def test_workers_of_a_load_session_import_the_installed_pyspark():
    spark = spark_session("local[1]", "spark-daemon-test")
    try:

        def where(_):
            import sys

            import pyspark as worker_pyspark

            return [(worker_pyspark.__file__, [p for p in sys.path if p.endswith(".zip")])]

        ((module, zips),) = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
        options = spark.sparkContext.getConf().get("spark.executor.extraJavaOptions")
    finally:
        spark.stop()
    assert module == pyspark.__file__
    assert ZIP not in zips
    # Spark puts its own module options first.
    assert options.endswith(JVM_OPTIONS)


SHOW_OPTIONS = (
    "from ingest.spark_runner import spark_session\n"
    "spark = spark_session('local[1]', 'options-test')\n"
    "conf = spark.sparkContext.getConf()\n"
    "print('OPTIONS=' + str(conf.get('spark.executor.extraJavaOptions')))\n"
    "print('DRIVER=' + str(conf.get('spark.driver.extraJavaOptions')))\n"
    "spark.stop()\n"
)


def _printed(tmp_path, command: list[str], script: str, prefix: str, *argv: str) -> str:
    """What `script`, run by `command` (an interpreter or spark-submit), prints after
    `prefix`."""
    return _printed_all(tmp_path, command, script, *argv)[prefix]


def _printed_all(tmp_path, command: list[str], script: str, *argv: str) -> dict[str, str]:
    """Each `PREFIX=value` line `script` prints, run by `command`, as {"PREFIX=": value}."""
    path = tmp_path / "script.py"
    path.write_text(script)
    done = subprocess.run(
        [*command, str(path), *argv],
        cwd=ROOT,
        env=dict(spark_env(), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isupper():
            assert key + sep not in printed, f"{key} printed twice: {done.stdout[-3000:]}"
            printed[key + sep] = value
    return printed


def _spark_submit(*conf: str) -> list[str]:
    return [str(spark_home() / "bin" / "spark-submit"), "--master", "local[1]", *conf]


def _submitted_options(tmp_path, *conf: str) -> str:
    return _printed(tmp_path, _spark_submit(*conf), SHOW_OPTIONS, "OPTIONS=")


@pytest.fixture(scope="module")
def plain_submission(tmp_path_factory) -> dict[str, str]:
    """The session's executor and driver options under a spark-submit that sets neither
    (one submission, a JVM start of several seconds, for the two tests that read it)."""
    return _printed_all(tmp_path_factory.mktemp("plain"), _spark_submit(), SHOW_OPTIONS)


def test_executor_java_options_given_to_spark_submit_are_kept(tmp_path, plain_submission):
    given = "-Dsome.site.setting=1"
    options = _submitted_options(tmp_path, "--conf", f"spark.executor.extraJavaOptions={given}")
    assert options.endswith(given) and JVM_OPTIONS not in options
    assert plain_submission["OPTIONS="].endswith(JVM_OPTIONS)


def test_executor_java_options_given_to_the_session_are_kept():
    spark = spark_session(
        "local[1]", "options-test", {"spark.executor.extraJavaOptions": "-Dmine=1"}
    )
    try:
        options = spark.sparkContext.getConf().get("spark.executor.extraJavaOptions")
        assert options.endswith("-Dmine=1") and JVM_OPTIONS not in options
    finally:
        spark.stop()


SHOW_DRIVER_JVM = (
    "import sys\n"
    "from ingest.spark_runner import spark_session\n"
    "given = {'spark.driver.extraJavaOptions': sys.argv[1]} if len(sys.argv) > 1 else None\n"
    "spark = spark_session('local[1]', 'driver-options-test', given)\n"
    "jvm = spark.sparkContext._jvm\n"
    "args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()\n"
    "print('ARGS=' + ' '.join(str(a) for a in args))\n"
    "spark.stop()\n"
)


def _driver_jvm_arguments(tmp_path, *argv: str) -> str:
    """The input arguments of the driver JVM that spark_session started in a fresh
    interpreter, as the JVM itself reports them."""
    return _printed(tmp_path, [sys.executable], SHOW_DRIVER_JVM, "ARGS=", *argv)


def test_a_driver_jvm_the_session_starts_runs_with_the_loads_options(tmp_path):
    arguments = _driver_jvm_arguments(tmp_path).split()
    assert set(JVM_OPTIONS.split()) <= set(arguments)


def test_driver_java_options_given_to_the_session_are_kept(tmp_path):
    arguments = _driver_jvm_arguments(tmp_path, "-Dmine=1").split()
    assert "-Dmine=1" in arguments
    assert not set(JVM_OPTIONS.split()) & set(arguments)


def test_under_spark_submit_the_session_claims_no_driver_options(plain_submission):
    # spark-submit started the driver's JVM before the session: options set now would not
    # be the JVM's, so the session leaves the setting as the submission gave it.
    assert JVM_OPTIONS not in plain_submission["DRIVER="]
