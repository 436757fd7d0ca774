"""Confluent's error codes, one constructor per error the registry can answer with.

Status and code travel together as in Confluent's REST API: the body is
``{"error_code": code, "message": message}`` and the HTTP status is the first
three digits of the code.
"""

from __future__ import annotations

MAX_VERSION = 2**31 - 1


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: object = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, 40403, "Schema not found")
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        40404,
        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        40405,
        f"Subject '{subject}' was not deleted first before being permanently deleted",
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. "
        f'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )


def incompatible(subject: str, details: list[str]) -> RegistryError:
    return RegistryError(
        409,
        409,
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: {details}",
    )


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {detail}")


def bad_request(detail: str) -> RegistryError:
    """The body is not JSON, or a field has the wrong JSON type (Confluent: 400)."""
    return RegistryError(400, 400, detail)


def unprocessable(detail: str) -> RegistryError:
    """A required field is missing (Confluent: 422 with code 422)."""
    return RegistryError(422, 422, detail)


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY and IMPORT"
    )


def not_permitted(detail: str) -> RegistryError:
    """An operation the mode (or the state) forbids (Confluent 42205)."""
    return RegistryError(422, 42205, detail)


def timed_out(detail: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {detail}")


def forwarding_failed(detail: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {detail}")


def unknown_leader(detail: str) -> RegistryError:
    return RegistryError(500, 50004, f"Unknown leader: {detail}")
