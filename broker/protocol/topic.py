"""Kafka's rule for legal topic names, in one place for the broker, the registry's
`kafkastore.topic` and the load's layout.

Facts from Kafka's `Topic.validate`: 1 to 249 characters of ASCII letters, digits,
'.', '_' and '-', and neither "." nor "..". (249 leaves room for the partition
suffix and `.deleted`/`-delete` markers in a 255-byte file name.)
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
LEGAL_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    if not name:
        return "a topic name must not be empty"
    if name in (".", ".."):
        return "a topic name cannot be '.' or '..'"
    if len(name) > MAX_NAME_LENGTH:
        return f"a topic name is at most {MAX_NAME_LENGTH} characters, not {len(name)}"
    if not LEGAL_CHARS.match(name):
        return "a topic name may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


def is_legal_topic_name(name: str | None) -> bool:
    return topic_name_problem(name) is None
