"""The Airflow side of the hourly load: where the DAGs find their settings, how they
submit the Spark job, the audit gate's verdict, the Assets they emit and the deadline
callback. The load itself lives in `ingest/`; the DAG files only schedule.

This package sits in the DAGs folder (which Airflow puts on sys.path) and is listed in
.airflowignore, so the DAG processor does not parse it for DAGs."""
