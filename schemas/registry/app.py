"""HTTP routes of the Confluent Schema Registry REST API, on FastAPI.

Bodies are parsed by hand rather than by pydantic models so that bad input gets
Confluent's answers, not FastAPI's: a body that is not JSON, or a field of the
wrong JSON type, is 400 with error code 400; a missing or unparsable schema is
42201; unknown fields are ignored (the Confluent clients send ``metadata`` and
``ruleSet``). Writes run in the thread pool because appending to the store blocks;
on an instance that does not lead they go to the leader (forward.py).
"""

from __future__ import annotations

import json
import logging
import ssl
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from schemas.registry import errors
from schemas.registry.errors import RegistryError
from schemas.registry.forward import POSITION_HEADER, Forwarder
from schemas.registry.metrics import RegistryMetrics
from schemas.registry.service import SCHEMA_TYPES, Registry, parse_level, parse_schema
from schemas.registry.state import Mode

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class _Json(JSONResponse):
    media_type = MEDIA_TYPE


def _flag(request: Request, name: str) -> bool:
    # Like Java's Boolean.valueOf: only "true" (any case) is true.
    return request.query_params.get(name, "false").strip().lower() == "true"


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found(text) from None


async def _body(request: Request) -> dict:
    raw = await request.body()
    if not raw.strip():
        raise errors.unprocessable("Request body is empty")
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise errors.bad_request(f"Malformed JSON body: {exc}") from None
    if not isinstance(document, dict):
        raise errors.bad_request(f"Expected a JSON object, got {type(document).__name__}")
    return document


def _field(document: dict, name: str, kind: type, default: Any = None) -> Any:
    value = document.get(name, default)
    if value is not None and not isinstance(value, kind):
        raise errors.bad_request(f"Field '{name}' must be a JSON {kind.__name__}, got {value!r}")
    return value


def _schema_in(document: dict):
    text = _field(document, "schema", str)
    schema_type = _field(document, "schemaType", str)
    references = _field(document, "references", list)
    if references:
        raise errors.invalid_schema("schema references are not supported by this registry")
    return parse_schema(text, schema_type)


async def _schema_from(request: Request):
    return _schema_in(await _body(request))


def _positive(document: dict, name: str) -> int | None:
    """An optional id or version chosen by the caller (IMPORT mode): an integer >= 1."""
    value = _field(document, name, int)
    if value is not None and (isinstance(value, bool) or value < 1):
        raise errors.bad_request(f"Field '{name}' must be a positive integer, got {value!r}")
    return value


async def _mode_from(request: Request) -> Mode:
    document = await _body(request)
    if "mode" not in document:
        raise errors.unprocessable("Field 'mode' is required")
    return Mode.parse(document["mode"])


async def _level_from(request: Request):
    document = await _body(request)
    if "compatibility" not in document:
        raise errors.unprocessable("Field 'compatibility' is required")
    return parse_level(document["compatibility"])


def create_app(registry: Registry, forward_tls: ssl.SSLContext | None = None) -> FastAPI:
    """`forward_tls`: how a follower checks an https leader it forwards writes to."""
    forwarder = Forwarder(registry, forward_tls)
    app = FastAPI(
        title="Schema Registry",
        default_response_class=_Json,
        openapi_url=None,
        on_shutdown=[forwarder.close],
    )
    state = registry.state
    metrics = RegistryMetrics(state, lambda: registry.leading)
    app.middleware("http")(metrics.middleware)

    async def _write(request: Request, call, *args) -> Response:
        """Run a write here when this instance leads (its answer says how far the store
        was read, for a forwarding follower), else send it to the leader."""
        leader = registry.write_target()
        if leader is not None:
            return await forwarder.forward(request, leader)
        result = await run_in_threadpool(call, *args)
        return _Json(result, headers={POSITION_HEADER: str(registry.position)})

    @app.exception_handler(RegistryError)
    async def registry_error(_: Request, exc: RegistryError) -> Response:
        return _Json(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        return _Json(
            {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {exc.detail}"},
            status_code=exc.status_code,
        )

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> Response:
        return _Json({"error_code": 422, "message": str(exc.errors())}, status_code=422)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Response:
        log.exception("request failed")
        return _Json({"error_code": 500, "message": "Internal Server Error"}, status_code=500)

    @app.get("/")
    async def root() -> dict:
        return {}

    @app.get("/metrics")
    async def prometheus() -> Response:
        """Prometheus text format (schemas/registry/metrics.py)."""
        return metrics.endpoint()

    # -- schemas by id --------------------------------------------------------

    @app.get("/schemas/types")
    async def schema_types() -> list:
        return list(SCHEMA_TYPES)

    @app.get("/schemas/ids/{schema_id}")
    async def schema_by_id(schema_id: str) -> dict:
        return {"schema": state.schema(_schema_id(schema_id)).text}

    @app.get("/schemas/ids/{schema_id}/schema")
    async def raw_schema_by_id(schema_id: str) -> Response:
        return Response(state.schema(_schema_id(schema_id)).text, media_type=MEDIA_TYPE)

    @app.get("/schemas/ids/{schema_id}/versions")
    async def id_versions(schema_id: str, request: Request) -> list:
        usages = state.usages(_schema_id(schema_id), deleted=_flag(request, "deleted"))
        return [{"subject": v.subject, "version": v.version} for v in usages]

    @app.get("/schemas/ids/{schema_id}/subjects")
    async def id_subjects(schema_id: str, request: Request) -> list:
        usages = state.usages(_schema_id(schema_id), deleted=_flag(request, "deleted"))
        return sorted({v.subject for v in usages})

    # -- subjects -------------------------------------------------------------

    @app.get("/subjects")
    async def subjects(request: Request) -> list:
        prefix = request.query_params.get("subjectPrefix", "")
        return [
            s for s in state.subjects(deleted=_flag(request, "deleted")) if s.startswith(prefix)
        ]

    @app.get("/subjects/{subject}/versions")
    async def versions(subject: str, request: Request) -> list:
        return [v.version for v in state.versions(subject, deleted=_flag(request, "deleted"))]

    @app.get("/subjects/{subject}/versions/{version}")
    async def version(subject: str, version: str, request: Request) -> dict:
        return state.version(subject, version, deleted=_flag(request, "deleted")).body()

    @app.get("/subjects/{subject}/versions/{version}/schema")
    async def raw_version(subject: str, version: str, request: Request) -> Response:
        found = state.version(subject, version, deleted=_flag(request, "deleted"))
        return Response(found.schema.text, media_type=MEDIA_TYPE)

    @app.get("/subjects/{subject}/versions/{version}/referencedby")
    async def referenced_by(subject: str, version: str) -> list:
        state.version(subject, version)
        return []  # references are not supported, so nothing refers to anything

    @app.post("/subjects/{subject}/versions")
    async def register(subject: str, request: Request) -> Response:
        document = await _body(request)
        schema = _schema_in(document)
        schema_id, number = _positive(document, "id"), _positive(document, "version")

        def call() -> dict:
            return {"id": registry.register(subject, schema, schema_id, number)}

        return await _write(request, call)

    @app.post("/subjects/{subject}")
    async def lookup(subject: str, request: Request) -> dict:
        schema = await _schema_from(request)
        return state.lookup(subject, schema, deleted=_flag(request, "deleted")).body()

    @app.delete("/subjects/{subject}")
    async def delete_subject(subject: str, request: Request) -> Response:
        permanent = _flag(request, "permanent")
        return await _write(request, registry.delete_subject, subject, permanent)

    @app.delete("/subjects/{subject}/versions/{version}")
    async def delete_version(subject: str, version: str, request: Request) -> Response:
        permanent = _flag(request, "permanent")
        return await _write(request, registry.delete_version, subject, version, permanent)

    # -- compatibility config and checks --------------------------------------

    @app.get("/config")
    async def global_config() -> dict:
        return {"compatibilityLevel": state.global_level().value}

    def _set_level(subject: str | None, level) -> dict:
        return {"compatibility": registry.set_level(subject, level).value}

    def _delete_level(subject: str | None) -> dict:
        return {"compatibilityLevel": registry.delete_level(subject).value}

    @app.put("/config")
    async def put_global_config(request: Request) -> Response:
        return await _write(request, _set_level, None, await _level_from(request))

    @app.delete("/config")
    async def delete_global_config(request: Request) -> Response:
        return await _write(request, _delete_level, None)

    @app.get("/config/{subject}")
    async def subject_config(subject: str, request: Request) -> dict:
        level = state.subject_level(subject)
        if level is None:
            if not _flag(request, "defaultToGlobal"):
                raise errors.subject_config_not_found(subject)
            level = state.global_level()
        return {"compatibilityLevel": level.value}

    @app.put("/config/{subject}")
    async def put_subject_config(subject: str, request: Request) -> Response:
        return await _write(request, _set_level, subject, await _level_from(request))

    @app.delete("/config/{subject}")
    async def delete_subject_config(subject: str, request: Request) -> Response:
        return await _write(request, _delete_level, subject)

    async def _check(subject: str, version: str | None, request: Request) -> dict:
        schema = await _schema_from(request)
        details = registry.check(subject, version, schema)
        answer: dict[str, Any] = {"is_compatible": not details}
        if _flag(request, "verbose"):
            answer["messages"] = details
        return answer

    @app.post("/compatibility/subjects/{subject}/versions/{version}")
    async def check_version(subject: str, version: str, request: Request) -> dict:
        return await _check(subject, version, request)

    @app.post("/compatibility/subjects/{subject}/versions")
    async def check_all(subject: str, request: Request) -> dict:
        return await _check(subject, None, request)

    # -- mode: READWRITE, READONLY, IMPORT ------------------------------------

    def _set_mode(subject: str | None, mode: Mode, force: bool) -> dict:
        return {"mode": registry.set_mode(subject, mode, force).value}

    def _delete_mode(subject: str) -> dict:
        return {"mode": registry.delete_mode(subject).value}

    @app.get("/mode")
    async def mode() -> dict:
        return {"mode": state.global_mode().value}

    @app.put("/mode")
    async def put_mode(request: Request) -> Response:
        mode = await _mode_from(request)
        return await _write(request, _set_mode, None, mode, _flag(request, "force"))

    @app.get("/mode/{subject}")
    async def subject_mode(subject: str) -> dict:
        return {"mode": state.mode_for(subject).value}

    @app.put("/mode/{subject}")
    async def put_subject_mode(subject: str, request: Request) -> Response:
        mode = await _mode_from(request)
        return await _write(request, _set_mode, subject, mode, _flag(request, "force"))

    @app.delete("/mode/{subject}")
    async def delete_subject_mode(subject: str, request: Request) -> Response:
        return await _write(request, _delete_mode, subject)

    return app
