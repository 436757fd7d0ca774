"""The load's Python worker daemon (ingest/spark_daemon.py): which pyspark.zip it drops
from the path, and that a real Spark application's workers then import PySpark from the
installed package."""

from __future__ import annotations

from pathlib import Path

import pyspark

from ingest.spark_daemon import prefer_installed_pyspark
from ingest.spark_runner import spark_session

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
    finally:
        spark.stop()
    assert module == pyspark.__file__
    assert ZIP not in zips
