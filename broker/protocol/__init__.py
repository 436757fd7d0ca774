"""The Kafka wire protocol as data, sans-I/O: declarations, one codec, framing.

See README.md in this directory for the conventions.
"""
