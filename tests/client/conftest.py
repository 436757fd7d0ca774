"""The client's tests run against our broker and librdkafka's mock cluster (`kafka`)."""

from tests.helpers.mock_cluster import kafka, mock_cluster  # noqa: F401  (fixtures)
