"""Command-line tools in the shape of Kafka's `bin/kafka-*.sh` (README.md here)."""
