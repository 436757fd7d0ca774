"""A client of the Confluent Schema Registry REST API (ours or Confluent's), over httpx.

Schemas by id and registrations never change once made, so they are cached for
the life of the client; the latest version of a subject does change, so it is
cached for ``latest_ttl`` seconds only (0 disables that cache).
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(Exception):
    """An error answer: HTTP status, Confluent error code and message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, error code {error_code})")
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class RegisteredSchema:
    subject: str
    version: int
    id: int
    schema: str


def _subject_path(subject: str) -> str:
    return quote(subject, safe="")


def _schema_text(schema: str | dict) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


def _user_info(text: str | None) -> tuple[str, str] | None:
    """Confluent's ``basic.auth.user.info``: ``user:password``."""
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise ValueError("basic.auth.user.info must look like user:password")
    return user, password


@dataclass(frozen=True)
class RegistrySettings:
    """Where a registry is and how to reach it: picklable, so a Spark task carries it and
    builds its own client on the executor. Field names are Confluent's client settings."""

    url: str
    basic_auth_user_info: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], prefix: str = "registry.") -> RegistrySettings:
        """From `<prefix>url`, `<prefix>basic.auth.user.info`, `<prefix>ssl.ca.location`,
        `<prefix>ssl.certificate.location`, `<prefix>ssl.key.location` (absent = None)."""
        return cls(
            config[f"{prefix}url"],
            basic_auth_user_info=config.get(f"{prefix}basic.auth.user.info"),
            ssl_ca_location=config.get(f"{prefix}ssl.ca.location"),
            ssl_certificate_location=config.get(f"{prefix}ssl.certificate.location"),
            ssl_key_location=config.get(f"{prefix}ssl.key.location"),
        )

    def client(self, **kwargs) -> RegistryClient:
        return RegistryClient(
            self.url,
            basic_auth_user_info=self.basic_auth_user_info,
            ssl_ca_location=self.ssl_ca_location,
            ssl_certificate_location=self.ssl_certificate_location,
            ssl_key_location=self.ssl_key_location,
            **kwargs,
        )


class RegistryClient:
    """``basic_auth_user_info`` (``user:password``) and ``ssl_ca_location`` (a PEM of CA
    certificates for an https registry) are Confluent's client settings of the same names;
    ``ssl_certificate_location``/``ssl_key_location`` present a client certificate."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        latest_ttl: float = 30.0,
        basic_auth_user_info: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
    ) -> None:
        # Imported here: httpx pulls in its command line's rich and click (~0.25 s), a
        # cost every fresh Spark Python worker would pay before it knows whether it needs
        # the registry at all (ingest/schema_pins.py).
        import httpx

        tls = ssl.create_default_context(cafile=ssl_ca_location)
        if ssl_certificate_location:
            tls.load_cert_chain(ssl_certificate_location, ssl_key_location)
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            timeout=timeout,
            headers={"Accept": f"{MEDIA_TYPE}, application/json", "Content-Type": MEDIA_TYPE},
            auth=_user_info(basic_auth_user_info),
            verify=tls,
        )
        self.latest_ttl = latest_ttl
        self._lock = threading.Lock()
        self._schemas_by_id: dict[int, str] = {}
        self._ids_by_subject_schema: dict[tuple[str, str], int] = {}
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: dict | None = None, params: dict | None = None):
        response = self._http.request(method, path, json=body, params=params)
        if response.is_success:
            return response.json()
        try:
            error = response.json()
            raise RegistryError(response.status_code, error["error_code"], error["message"])
        except (ValueError, KeyError, TypeError):
            raise RegistryError(response.status_code, -1, response.text) from None

    # -- schemas --------------------------------------------------------------

    def metrics(self) -> str:
        """The registry's `/metrics` (Prometheus text), over the same TLS and login."""
        answer = self._http.get("/metrics")
        answer.raise_for_status()
        return answer.text

    def register(self, subject: str, schema: str | dict) -> int:
        """The global id of ``schema`` under ``subject``, registering it if it is new."""
        text = _schema_text(schema)
        key = (subject, text)
        with self._lock:
            cached = self._ids_by_subject_schema.get(key)
        if cached is not None:
            return cached
        answer = self._call(
            "POST", f"/subjects/{_subject_path(subject)}/versions", {"schema": text}
        )
        schema_id = answer["id"]
        with self._lock:
            self._ids_by_subject_schema[key] = schema_id
        return schema_id

    def lookup(self, subject: str, schema: str | dict) -> RegisteredSchema:
        """The version of ``subject`` holding ``schema`` (40401 / 40403 if none)."""
        text = _schema_text(schema)
        answer = self._call("POST", f"/subjects/{_subject_path(subject)}", {"schema": text})
        found = RegisteredSchema(
            answer["subject"], answer["version"], answer["id"], answer["schema"]
        )
        with self._lock:
            self._ids_by_subject_schema[(subject, text)] = found.id
            self._schemas_by_id.setdefault(found.id, found.schema)
        return found

    def schema(self, schema_id: int) -> str:
        """The schema text registered as ``schema_id``."""
        with self._lock:
            cached = self._schemas_by_id.get(schema_id)
        if cached is not None:
            return cached
        text = self._call("GET", f"/schemas/ids/{int(schema_id)}")["schema"]
        with self._lock:
            self._schemas_by_id[schema_id] = text
        return text

    # -- subjects -------------------------------------------------------------

    def subjects(self) -> list[str]:
        return self._call("GET", "/subjects")

    def versions(self, subject: str) -> list[int]:
        return self._call("GET", f"/subjects/{_subject_path(subject)}/versions")

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        answer = self._call("GET", f"/subjects/{_subject_path(subject)}/versions/{version}")
        found = RegisteredSchema(
            answer["subject"], answer["version"], answer["id"], answer["schema"]
        )
        with self._lock:
            self._schemas_by_id.setdefault(found.id, found.schema)
        return found

    def latest(self, subject: str) -> RegisteredSchema:
        """The latest version of ``subject``, cached for ``latest_ttl`` seconds."""
        now = time.monotonic()
        with self._lock:
            cached = self._latest.get(subject)
        if cached is not None and now - cached[0] < self.latest_ttl:
            return cached[1]
        found = self.version(subject, "latest")
        with self._lock:
            self._latest[subject] = (now, found)
        return found

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        params = {"permanent": "true"} if permanent else None
        deleted = self._call("DELETE", f"/subjects/{_subject_path(subject)}", params=params)
        with self._lock:
            self._latest.pop(subject, None)
            for key in [k for k in self._ids_by_subject_schema if k[0] == subject]:
                del self._ids_by_subject_schema[key]
        return deleted

    # -- compatibility --------------------------------------------------------

    def compatibility(self, subject: str | None = None) -> str:
        """The level in force: the subject's own, else the global one."""
        if subject is None:
            return self._call("GET", "/config")["compatibilityLevel"]
        path = f"/config/{_subject_path(subject)}"
        return self._call("GET", path, params={"defaultToGlobal": "true"})["compatibilityLevel"]

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_subject_path(subject)}"
        return self._call("PUT", path, {"compatibility": level.upper()})["compatibility"]

    def test_compatibility(
        self, subject: str, schema: str | dict, version: int | str = "latest"
    ) -> tuple[bool, list[str]]:
        """Whether ``schema`` may follow ``version`` of ``subject``, and why not."""
        path = f"/compatibility/subjects/{_subject_path(subject)}/versions/{version}"
        answer = self._call(
            "POST", path, {"schema": _schema_text(schema)}, params={"verbose": "true"}
        )
        return answer["is_compatible"], answer.get("messages", [])
