"""Airflow for the DAG tests: one temporary AIRFLOW_HOME with a SQLite metadata database,
migrated once per session, and the repository's dags/ as the DAGs folder.

Airflow reads its configuration when it is first imported, so the environment is set
here, when pytest loads this conftest -- before any test module imports airflow.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from broker.processes import ROOT
from tests.helpers.cluster import broker_without_group_delay  # noqa: F401  (broker_overrides)

DAGS = ROOT / "dags"

if "airflow" in sys.modules:  # configured already: our settings would be ignored
    raise RuntimeError("airflow was imported before tests/dags/conftest.py set AIRFLOW_HOME")

_HOME = Path(tempfile.mkdtemp(prefix="airflow-home-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(_HOME),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }
)


@pytest.fixture(scope="session")
def airflow_db():
    """The migrated metadata database (once per session)."""
    from airflow.utils.db import initdb

    initdb()
    yield _HOME
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def dagbag(airflow_db):
    """The DAGs folder parsed as the DAG processor parses its bundle (which puts the
    folder on sys.path, so the DAGs import their helper package)."""
    from airflow.dag_processing.dagbag import BundleDagBag

    return BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS)
