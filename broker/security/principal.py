"""The principal of a TLS client: its certificate's subject as an RFC 2253 name, mapped by
Kafka's `ssl.principal.mapping.rules`.

Rules, as Kafka writes them: `RULE:<pattern>/<replacement>/[LU]` and `DEFAULT`,
comma-separated (a pattern may itself hold commas: a rule ends at its third unescaped
slash and an optional L or U). The first rule whose pattern matches the *whole* subject
gives the name (`$1` in the replacement is the first group), lower- or upper-cased by L or
U; `DEFAULT` gives the subject unchanged. No rule matching refuses the connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

USER = "User:"
# OpenSSL's long attribute names (what ssl.getpeercert() gives) as RFC 2253 writes them.
_ATTRIBUTES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU])?)\s*(?:,|$)")


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if not self.pattern.fullmatch(subject):
            return None
        name = self.pattern.sub(self.replacement, subject)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_rules(text: str) -> list[Rule]:
    rules: list[Rule] = []
    position = 0
    text = text.strip()
    while position < len(text):
        found = _RULE.match(text, position)
        if found is None or found.end() == position:
            raise ValueError(f"invalid rule at {text[position:]!r}")
        default, pattern, replacement, case = found.groups()
        if default:
            rules.append(Rule(None))
        else:
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None
            # Java's $1 is Python's \1.
            python_replacement = re.sub(r"\$(\d)", r"\\\1", replacement.replace("\\/", "/"))
            rules.append(Rule(compiled, python_replacement, case or ""))
        position = found.end()
    return rules


def principal_rules_problem(text: str) -> str | None:
    try:
        parse_rules(text)
    except ValueError as exc:
        return str(exc)
    return None


def subject_name(subject: tuple) -> str:
    """ssl.getpeercert()'s `subject` (RDNs, most significant first) as RFC 2253 writes it:
    least significant first, `ATTR=value` joined by commas, special characters escaped."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append(
            "+".join(f"{_ATTRIBUTES.get(attr, attr)}={_escape(value)}" for attr, value in rdn)
        )
    return ",".join(rdns)


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped


class PrincipalMapper:
    def __init__(self, rules: str) -> None:
        self.rules = parse_rules(rules)

    def principal(self, subject: str) -> str:
        """`User:<name>` for an RFC 2253 subject; NoMatchingRule when no rule applies."""
        for rule in self.rules:
            name = rule.apply(subject)
            if name is not None:
                return USER + name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules entry matches {subject!r}")
