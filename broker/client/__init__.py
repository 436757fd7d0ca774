"""Our Kafka client library: blocking sockets, the producer, the simple consumer, admin calls."""
