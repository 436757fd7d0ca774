"""The product's own Avro schemas, the ``.avsc`` files under ``schemas/avro/``.

A schema is named by its file stem: ``AuditEvent``, ``SearchEvent``,
``PageViewEvent.v2``. An evolving schema keeps one file per version
(``<Name>.v<N>.avsc``); asking for the bare name gives its highest version.
Stems with other suffixes (``PageViewEvent.required-field``) are test variants,
loadable by their full stem but never chosen as the latest version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

AVRO_DIR = Path(__file__).parent / "avro"

_VERSIONED = re.compile(r"^(?P<base>[^.]+)\.v(?P<version>\d+)$")


def names() -> list[str]:
    """Every schema stem in the catalog, sorted."""
    return sorted(p.stem for p in AVRO_DIR.glob("*.avsc"))


def versions(base: str) -> list[str]:
    """The stems of ``base``'s numbered versions, oldest first (empty if unversioned)."""
    found = []
    for stem in names():
        match = _VERSIONED.match(stem)
        if match and match["base"] == base:
            found.append((int(match["version"]), stem))
    return [stem for _, stem in sorted(found)]


def path(name: str) -> Path:
    """The file holding ``name``; a bare versioned name resolves to its latest version."""
    candidate = AVRO_DIR / f"{name}.avsc"
    if candidate.is_file():
        return candidate
    numbered = versions(name)
    if numbered:
        return AVRO_DIR / f"{numbered[-1]}.avsc"
    raise KeyError(f"no schema named {name!r} in {AVRO_DIR} (known: {', '.join(names())})")


def load_str(name: str) -> str:
    """The schema text exactly as stored in its file."""
    return path(name).read_text(encoding="utf-8")


def load(name: str) -> dict:
    """The schema as parsed JSON (a fresh dict on every call, safe to mutate)."""
    return json.loads(load_str(name))
