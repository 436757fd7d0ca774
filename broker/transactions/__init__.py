"""The transaction coordinator's pure core (KIP-98): states, records, decisions (see README.md)."""
