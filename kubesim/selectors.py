"""Label and field selectors with the grammar and matching rules of apimachinery.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
`!k`, and the integer comparisons `k>n`, `k<n`, comma-separated; keys and
values are checked like the real parser checks them. Field selectors:
`f=v`, `f==v`, `f!=v`, comma-separated, with `\\` escapes.

What this does not do: set-based selectors in structured form
(`matchExpressions`) are converted by `from_label_selector_object`, but nothing
here evaluates node affinity or other selector dialects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import ApiError, bad_request

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_key_problems(key: str) -> list[str]:
    """Why `key` is not a qualified name (empty when it is one)."""
    problems: list[str] = []
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        problems.append("prefix part must be non-empty")
    elif prefix:
        if len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        elif not _DNS1123_SUBDOMAIN.match(prefix):
            problems.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    elif not _NAME_PART.match(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return problems


def label_value_problems(value: str) -> list[str]:
    problems: list[str] = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _VALUE.match(value):
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
            "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return problems


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if not present:
            return False
        try:
            have, want = int(str(value)), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.operator == "gt" else have < want


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


_TOKEN = re.compile(r"\s*(!=|==|=|>|<|\(|\)|,|!|[^\s!=<>(),]+)")


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if not match:  # pragma: no cover - the pattern accepts every non-space character
            raise bad_request(f"unable to parse requirement: unexpected character at {position}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `labelSelector=`; a malformed selector is a 400 like the real server's."""
    if not text or not text.strip():
        return LabelSelector()
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    position = 0

    def fail(why: str) -> ApiError:
        return bad_request(f"unable to parse requirement: {why}")

    def take() -> str | None:
        nonlocal position
        if position >= len(tokens):
            return None
        token = tokens[position]
        position += 1
        return token

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    while True:
        token = take()
        if token is None:
            raise fail("found '', expected: !, identifier, or 'end of string'")
        if token == "!":
            key = take()
            if key is None or key in "!=<>(),":
                raise fail(f"found '{key or ''}', expected: identifier")
            _check_key(key, fail)
            requirements.append(Requirement(key, "!"))
        else:
            key = token
            if key in ("=", "==", "!=", "(", ")", ",", ">", "<"):
                raise fail(f"found '{key}', expected: !, identifier, or 'end of string'")
            _check_key(key, fail)
            operator = peek()
            if operator is None or operator == ",":
                requirements.append(Requirement(key, "exists"))
            elif operator in ("=", "==", "!="):
                take()
                following = peek()
                if following is None or following == ",":
                    value = ""
                else:
                    value = take() or ""
                    if value in "!=<>()":
                        raise fail(f"found '{value}', expected: identifier")
                _check_value(value, fail)
                requirements.append(Requirement(key, "!=" if operator == "!=" else "=", (value,)))
            elif operator in (">", "<"):
                take()
                value = take()
                if value is None or not re.fullmatch(r"-?\d+", value):
                    raise fail(f"for 'gt', 'lt' operators, exactly one value is required; found {value!r}")
                requirements.append(Requirement(key, "gt" if operator == ">" else "lt", (value,)))
            elif operator in ("in", "notin"):
                take()
                if take() != "(":
                    raise fail("found '', expected: '('")
                values: list[str] = []
                while True:
                    item = take()
                    if item is None:
                        raise fail("found '', expected: ',' or ')'")
                    if item == ")":
                        break
                    if item == ",":
                        continue
                    _check_value(item, fail)
                    values.append(item)
                if not values:
                    raise fail(f"for '{operator}', 'notin' operators, values set can't be empty")
                requirements.append(Requirement(key, operator, tuple(values)))
            else:
                raise fail(f"found '{operator}', expected: in, notin, =, ==, !=, gt, lt")
        separator = take()
        if separator is None:
            break
        if separator != ",":
            raise fail(f"found '{separator}', expected: ',' or 'end of string'")
    return LabelSelector(tuple(requirements))


def _check_key(key: str, fail: Callable[[str], ApiError]) -> None:
    problems = label_key_problems(key)
    if problems:
        raise fail(f'key: Invalid value: "{key}": ' + "; ".join(problems))


def _check_value(value: str, fail: Callable[[str], ApiError]) -> None:
    problems = label_value_problems(value)
    if problems:
        raise fail(f'values[0][key]: Invalid value: "{value}": ' + "; ".join(problems))


def from_label_selector_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (`matchLabels`/`matchExpressions`) as a LabelSelector."""
    if not selector:
        return LabelSelector()
    requirements = [Requirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        requirements.append(
            Requirement(expression["key"], operators[expression["operator"]], tuple(expression.get("values") or ()))
        )
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    negated: bool


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    def matches(self, fields: Callable[[str], str]) -> bool:
        return all((fields(t.field) == t.value) != t.negated for t in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms

    def exact_value(self, field_label: str) -> str | None:
        for term in self.terms:
            if term.field == field_label and not term.negated:
                return term.value
        return None


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise bad_request(f"invalid field selector: unescaped {char} in value")
        else:
            out.append(char)
    if escaped:
        raise bad_request("invalid field selector: trailing backslash")
    return "".join(out)


def parse_field_selector(text: str | None, supported: Callable[[str], bool], unsupported_message: Callable[[str], str]) -> FieldSelector:
    """Parse `fieldSelector=`; a field the resource does not index is a 400, like the real server."""
    if not text or not text.strip():
        return FieldSelector()
    terms: list[FieldTerm] = []
    for part in _split_unescaped(text, ","):
        if not part.strip():
            continue
        match = re.match(r"^([^=!]+)(!=|==|=)(.*)$", part)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        label, operator, raw = match.group(1).strip(), match.group(2), match.group(3)
        if not supported(label):
            raise bad_request(unsupported_message(label))
        terms.append(FieldTerm(label, _unescape(raw), operator == "!="))
    return FieldSelector(tuple(terms))


def field_value(obj: Mapping[str, Any], label: str) -> str:
    """The string a field selector compares against (booleans as true/false, absent as "")."""
    current: Any = obj
    for part in label.split("."):
        if not isinstance(current, Mapping):
            current = None
            break
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)
