"""A schema registry serving the Confluent Schema Registry REST API.

``python -m schemas.registry start CONFIG`` runs it; see ``schemas/README.md``.
"""
