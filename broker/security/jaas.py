"""Kafka's JAAS-style login config, read from a config value (`sasl.jaas.config`):

    <LoginModule class> required username="admin" password="admin-secret" user_alice="x";

The login module's class is kept for the error messages only (the mechanism comes from the
key the config is under); the options are what matter: `username`/`password` are what this
broker sends as a client, `user_<name>="<password>"` the PLAIN users it accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRY = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')
USER_PREFIX = "user_"


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    options: dict[str, str]

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def users(self) -> dict[str, str]:
        """The PLAIN users: `user_<name>` options."""
        return {
            key[len(USER_PREFIX) :]: value
            for key, value in self.options.items()
            if key.startswith(USER_PREFIX) and len(key) > len(USER_PREFIX)
        }


def parse_jaas(text: str) -> JaasConfig:
    """ValueError (never quoting a password) when the text is not one login module entry."""
    entry = _ENTRY.fullmatch(text)
    if entry is None:
        raise ValueError("expected '<LoginModule> required key=\"value\" ...;'")
    module, _, rest = entry.groups()
    options: dict[str, str] = {}
    position = 0
    while rest[position:].strip():
        option = _OPTION.match(rest, position)
        if option is None:
            raise ValueError(f"malformed option in the JAAS config of {module}")
        key, value = option.groups()
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[key] = value
        position = option.end()
    return JaasConfig(module, options)
