"""The load also runs against librdkafka's mock cluster (test_load_mock_cluster.py)."""

from tests.mock_cluster import mock_cluster  # noqa: F401  (fixture)
