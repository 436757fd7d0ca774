"""PySpark's Python worker daemon, started faster (``spark.python.daemon.module``).

Every executor starts one daemon (``python -m <this module>``) on its first Python task;
the daemon forks one worker per concurrent task. Two costs of a new application's first
tasks (docs/benchmarks.md, "Ingest: end to end", cold round) are removed here:

* Spark puts ``pyspark.zip`` first on the workers' path. The zip holds sources only, so
  the daemon and then every forked worker compile PySpark again (~0.3 s of CPU each). Where
  that zip is the one inside an installed ``pyspark`` package (``pip install pyspark``:
  ``site-packages/pyspark/python/lib/pyspark.zip``, the layout of our environment and of a
  packed virtualenv shipped to executors), the same version is on the path as an
  installed package with compiled bytecode, so the zip is dropped from the path. A Spark
  distribution's ``$SPARK_HOME/python/lib/pyspark.zip`` is left as it is.
* The daemon imports ``pyspark.worker`` once before it forks, so workers start with it.
  It starts no thread (forking a process with threads is unsafe, which is why PySpark
  imports it after the fork); the load's own modules (pyarrow starts a thread) are still
  imported in each worker.
"""

from __future__ import annotations

import sys
from pathlib import Path


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """`path` without the ``pyspark.zip`` of an installed pyspark package when the
    directory that package is installed in is on `path` too (later: the interpreter's
    site-packages), so ``import pyspark`` finds the package. Nothing moves ahead of what
    the user ships (``spark.submit.pyFiles``)."""
    entries = {str(Path(entry)) for entry in path}

    def installed_copy(entry: str) -> bool:
        archive = Path(entry)
        if archive.name != "pyspark.zip" or len(archive.parents) < 4:
            return False
        package = archive.parents[2]
        return (
            package.name == "pyspark"
            and (package / "__init__.py").is_file()
            and str(package.parent) in entries
        )

    return [entry for entry in path if not installed_copy(entry)]


def main() -> None:
    sys.path[:] = prefer_installed_pyspark(sys.path)
    import pyspark.worker  # noqa: F401  (see the module's docstring)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
