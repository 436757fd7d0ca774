"""A small ConfigDef: keys declared once; values parsed, validated and documented from it.

Why not a dataclass per component: Kafka users expect `key=value` properties files and
`--override key=value`, errors that name the key and the offending value, and a reference
page listing every key. One declaration per key gives all three.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value was refused; the message names the key and the value."""


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError("expected true or false")


def _parse_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "long": int,
    "double": float,
    "boolean": _parse_bool,
    "string": str,
    "list": _parse_list,
    "password": str,
}


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # one of PARSERS
    default: Any  # None means "no default": required unless `optional`
    doc: str
    validator: Callable[[Any], str | None] | None = None  # returns a problem, or None
    optional: bool = False
    group: str = "general"
    # Shown in docs instead of a default that is computed at run time.
    default_doc: str | None = None
    # Changeable while the component runs (a broker's AlterConfigs), not only at start.
    dynamic: bool = False
    # The keys this one falls back to when it is not set, most specific first (Kafka's
    # synonyms: retention.ms -> log.retention.ms -> log.retention.minutes -> ...).
    synonyms: tuple[str, ...] = ()

    def parse(self, raw: Any) -> Any:
        if raw is None:
            return None
        if not isinstance(raw, str):
            # Typed values (from YAML): only a list key takes a list.
            if (self.type == "list") != isinstance(raw, list):
                raise ConfigError(
                    f"Invalid value {raw!r} for configuration {self.name}: expected a {self.type}"
                )
            value = raw
        else:
            try:
                value = PARSERS[self.type](raw.strip() if self.type != "password" else raw)
            except ValueError as exc:
                raise ConfigError(
                    f"Invalid value {self._shown(raw)} for configuration {self.name}: "
                    f"{exc or 'not a ' + self.type}"
                ) from None
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(
                    f"Invalid value {self._shown(raw)} for configuration {self.name}: {problem}"
                )
        return value

    def _shown(self, raw: Any) -> str:
        # A secret never reaches an error message (and so never a log), as Kafka's
        # Password type prints [hidden].
        return "[hidden]" if self.type == "password" else repr(raw)

    def format(self, value: Any) -> str | None:
        """A parsed value as the string a properties file (or DescribeConfigs) shows."""
        if value is None:
            return None
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, list | tuple):
            return ",".join(str(v) for v in value)
        return str(value)


_SECRET_WORDS = ("passw", "pasw", "pwd", "secret", "jaas", "user.info", "credential")


def _looks_secret(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


# Validators: each returns None when the value is fine, else a short reason.
def at_least(minimum: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"value must be at least {minimum}"


def between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"value must be between {low} and {high}"


def one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"value must be one of {', '.join(choices)}"


def non_empty(value: Any) -> str | None:
    return None if value else "value must not be empty"


@dataclass
class ConfigDef:
    """An ordered set of keys; `parse` turns raw strings into a validated mapping."""

    title: str
    keys: dict[str, Key] = field(default_factory=dict)

    def define(self, name: str, type: str, default: Any, doc: str, **kwargs: Any) -> ConfigDef:
        if name in self.keys:
            raise ValueError(f"configuration key {name} declared twice")
        if type not in PARSERS:
            raise ValueError(f"unknown type {type} for {name}")
        self.keys[name] = Key(name, type, default, doc, **kwargs)
        return self

    def parse(self, raw: Mapping[str, Any], *, allow_unknown: Iterable[str] = ()) -> dict[str, Any]:
        """Validated values for every key (defaults filled in). Unknown keys are refused:
        a typo must not silently fall back to a default."""
        allowed_prefixes = tuple(allow_unknown)
        unknown = [
            k for k in raw if k not in self.keys and not k.startswith(allowed_prefixes or ("\0",))
        ]
        if unknown:
            name = unknown[0]
            # A misspelt secret's key is still a secret's: its value is not shown.
            shown = "[hidden]" if _looks_secret(name) else repr(raw[name])
            raise ConfigError(f"Unknown configuration {name!r} (value {shown})")
        values: dict[str, Any] = {}
        for key in self.keys.values():
            if key.name in raw:
                values[key.name] = key.parse(raw[key.name])
            elif key.default is None and not key.optional:
                raise ConfigError(f"Missing required configuration {key.name}")
            else:
                values[key.name] = key.default
        for name in raw:
            if name not in self.keys:
                values[name] = raw[name]
        return values

    def to_markdown(self) -> str:
        lines = [
            f"## {self.title}",
            "",
            "| key | type | default | description |",
            "|---|---|---|---|",
        ]
        if any(key.dynamic for key in self.keys.values()):
            lines.insert(2, "Keys marked *dynamic* can be changed while running (AlterConfigs).\n")
        for key in self.keys.values():
            default = key.default_doc if key.default_doc is not None else key.default
            if isinstance(default, list):
                default = ",".join(default)
            shown = "(required)" if default is None and not key.optional else f"`{default}`"
            if default is None and key.optional:
                shown = "(none)"
            doc = f"*dynamic*: {key.doc}" if key.dynamic else key.doc
            lines.append(f"| `{key.name}` | {key.type} | {shown} | {doc} |")
        return "\n".join(lines) + "\n"

    def to_properties(self, settings: Mapping[str, str], header: str = "") -> str:
        """A documented properties file: every key with its doc; keys in `settings` are set,
        the others shown commented out at their defaults."""
        out = [f"# {line}".rstrip() for line in header.splitlines()]
        group = None
        for key in self.keys.values():
            if key.group != group:
                group = key.group
                out += ["", f"############################# {group} #############################"]
            out.append("")
            out += [f"# {line}" for line in textwrap.wrap(key.doc, 88)]
            default = key.default_doc if key.default_doc is not None else key.default
            if isinstance(default, list):
                default = ",".join(default)
            if isinstance(default, bool):
                default = str(default).lower()
            out.append(
                f"# type: {key.type}; default: {'(none)' if default is None else default}"
                + ("; dynamic" if key.dynamic else "")
            )
            if key.name in settings:
                out.append(f"{key.name}={settings[key.name]}")
            else:
                out.append(f"#{key.name}={'' if default is None else default}")
        return "\n".join(out) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties text as a dict, by java.util.Properties.load's rules (the format
    every Kafka and Confluent config file is in):

    - a line whose first non-blank character is ``#`` or ``!`` is a comment; blank lines
      are skipped;
    - a line ending in an odd number of backslashes continues on the next line, whose
      leading white space is dropped;
    - the key ends at the first unescaped ``=``, ``:`` or white space; white space, then
      one ``=`` or ``:``, then white space may follow; the rest of the line is the value
      (``key value``, ``key=value`` and ``key : value`` are the same; ``key`` alone has
      the empty value);
    - ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes; a backslash before
      any other character stands for that character (``\\=``, ``\\:``, ``\\ `` in keys).
    """
    result: dict[str, str] = {}
    logical: str | None = None
    for raw_line in text.splitlines():
        line = raw_line.lstrip(" \t\f")
        if logical is None:
            if not line or line[0] in "#!":
                continue
            logical = ""
        logical += line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            logical = logical[:-1]  # continued on the next line
            continue
        key, value = _split_property(logical)
        result[key] = value
        logical = None
    if logical is not None:  # the last line ended in a continuation
        key, value = _split_property(logical)
        result[key] = value
    return result


_SEPARATORS = "=:"
_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _split_property(line: str) -> tuple[str, str]:
    """A logical line (continuations joined) as (key, value), escapes resolved."""
    i = 0
    while i < len(line) and line[i] not in _SEPARATORS + _BLANKS:
        i += 2 if line[i] == "\\" else 1
    key_end = min(i, len(line))
    while i < len(line) and line[i] in _BLANKS:
        i += 1
    if i < len(line) and line[i] in _SEPARATORS:
        i += 1
        while i < len(line) and line[i] in _BLANKS:
            i += 1
    return _unescape(line[:key_end], line), _unescape(line[i:], line)


def _unescape(text: str, line: str) -> str:
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        code = text[i + 1]
        if code == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"Malformed \\uXXXX escape in properties line {line!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(code, code))
            i += 2
    return "".join(out)


def add_config_commands(commands: Any, config_help: str, properties_file: str) -> Any:
    """The command-line conventions of a component configured by a properties file, on an
    argparse subparsers object: ``config-docs [--properties]`` and the ``start`` command
    with its ``CONFIG`` file and repeatable ``--override key=value``. Returns ``start``,
    for the component's own options."""
    docs = commands.add_parser("config-docs", help="print the configuration reference (Markdown)")
    docs.add_argument("--properties", action="store_true", help=f"print {properties_file} instead")
    start = commands.add_parser("start", help=config_help)
    start.add_argument("config", help=f"a Java-properties file, e.g. {properties_file}")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one configuration key (repeatable)",
    )
    return start


def load_properties(path: str | Path, overrides: Iterable[str] = ()) -> dict[str, str]:
    """A properties file plus `key=value` overrides (as `--override` passes them)."""
    try:
        raw = parse_properties(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"Cannot read configuration file {path}: {exc.strerror}") from None
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"Malformed override {item!r}: expected key=value")
        key, value = item.split("=", 1)
        raw[key.strip()] = value.strip()
    return raw
