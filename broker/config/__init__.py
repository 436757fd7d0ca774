"""Configuration: one registry of keys (ConfigDef), each declared once with type, default,
validation and doc. Parsing, validation errors and generated docs all come from it."""

from broker.config.definition import ConfigDef, ConfigError, Key, parse_properties

__all__ = ["ConfigDef", "ConfigError", "Key", "parse_properties"]
