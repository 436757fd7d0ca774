"""A JVM of this process's own, holding Hadoop's client, where no Spark driver JVM exists.

A Spark task runs in a Python worker that has no py4j gateway: only the driver has one.
So that a task can reach an ``hdfs://`` root through Hadoop's FileSystem API -- the same
API, configuration, HA NameNodes and security as the driver -- the worker starts a small
JVM of its own once (py4j's GatewayServer, about 2 s with the options below) and keeps it
for the worker's life (Spark reuses Python workers across tasks). Bulk bytes never cross
py4j: ``HadoopFileSystem.open_write`` spools to local disk and has the JVM copy the file
(measured in docs/benchmarks.md: py4j streams 12-17 MB/s, the JVM's copy 100-190 MB/s).

The classpath is, in order: ``$HADOOP_CONF_DIR`` (core-site.xml, hdfs-site.xml), the
process's ``$CLASSPATH`` (on YARN the container's: Spark's and the cluster's Hadoop jars and
configuration), then Spark's ``jars/`` (Hadoop's shaded client and py4j). On YARN the JVM
inherits the container's ``HADOOP_TOKEN_FILE_LOCATION``, so it authenticates with the
application's delegation tokens as the executor does. The same JVM serves the Airflow
workers' driver-less steps (plan, audit, finalize) for an ``hdfs://`` root.

A process that holds a Spark driver's JVM (a test, or the command line after its load)
uses that JVM instead, with the same fresh configuration. The JVM dies with its Python process (py4j's die-on-broken-pipe): a killed task leaves no
JVM behind.
"""

from __future__ import annotations

import glob
import os
import threading

from py4j.java_gateway import GatewayParameters, JavaGateway, JVMView, launch_gateway

# The JVM only moves bytes between a local file and the filesystem: a small heap, the
# serial collector and C1 alone start it in about a third of the default time.
JAVA_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

_lock = threading.Lock()
_gateway: tuple[int, JavaGateway] | None = None  # (pid that started it, gateway)


def spark_jars() -> str:
    """Spark's jars directory (SPARK_HOME's, else the pyspark package's)."""
    from pyspark.find_spark_home import _find_spark_home

    return os.path.join(_find_spark_home(), "jars")


def classpath() -> str:
    parts = []
    if conf_dir := os.environ.get("HADOOP_CONF_DIR"):
        parts.append(conf_dir)
    if inherited := os.environ.get("CLASSPATH"):
        parts.append(inherited)
    jars = spark_jars()
    if not glob.glob(os.path.join(jars, "py4j-*.jar")):
        raise RuntimeError(f"no py4j jar in {jars}: cannot start a JVM for Hadoop's client")
    parts.append(os.path.join(jars, "*"))
    return os.pathsep.join(parts)


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else "java"


def hadoop_jvm() -> JVMView:
    """This process's JVM: the Spark driver's when the process has one (pyspark routes
    every py4j error through its own handler, which would misread another JVM's
    exceptions), else our own, started on first use (again in a forked child)."""
    from pyspark import SparkContext

    if SparkContext._jvm is not None:
        return SparkContext._jvm
    global _gateway
    with _lock:
        if _gateway is None or _gateway[0] != os.getpid():
            port = launch_gateway(
                classpath=classpath(),
                javaopts=list(JAVA_OPTIONS),
                java_path=_java(),
                die_on_exit=True,
            )
            _gateway = (
                os.getpid(),
                JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True)),
            )
        return _gateway[1].jvm
