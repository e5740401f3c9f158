"""CRD `x-kubernetes-validations` rules, evaluated with a CEL library as kube-apiserver does.

The rules are compiled with `cel-python` (celpy) when a server is built; a
rule that uses a function neither CEL's standard library, its macros nor the
Kubernetes extensions below provide makes `compile_crd` raise
`UnsupportedRule`, so the server never starts with a rule it would skip.

Evaluation follows apiextensions-apiserver's schema/cel/validation.go:
rules run on every write of a custom object (status writes included), on
each value the schema node describes (`self`; `oldSelf` on updates where the
old value correlates: object properties, map values, and items of
`x-kubernetes-list-type: map` lists matched by their keys), never on null
values; transition rules (those naming `oldSelf`) run only where the old
value correlates. A false rule is `<path>: Invalid value: "<schema type>":
<message or "failed rule: <rule>">` (`fieldPath` and `reason` honoured); an
evaluation error is `... <error> evaluating rule: <rule>`. The root path is
written `<nil>` as Go prints a nil field.Path. Validation ratcheting (on by
default since Kubernetes 1.30): a failing rule that does not name `oldSelf`
on a value unchanged since the old object (or under an unchanged correlatable
parent) becomes a warning instead of an error. At the root, `self.metadata`
holds only `name` and `generateName`, as on a real server.

Kubernetes extension functions provided on top of the library: the quantity
library (`quantity`, `isQuantity`, `isGreaterThan`, `isLessThan`,
`compareTo`, `add`, `sub`, `asInteger`, `asApproximateFloat`, `isInteger`,
`sign`), the lists library (`isSorted`, `sum`, `min`, `max`, `indexOf`,
`lastIndexOf`) and the strings helpers (`lowerAscii`, `upperAscii`, `trim`,
`replace`, `split`, `join`, `substring`, `charAt`).

What this does not do: no static type checking (a type error surfaces when a
rule runs, not when the server starts), no cost budget, no
`messageExpression` evaluation beyond what cel-python evaluates (supported:
it is evaluated like a rule and must return a string), no `url`, `ip`,
`cidr`, `format` or `authz` libraries, and `optionalOldSelf` is honoured only
as "evaluate with oldSelf null on create".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import celpy
import celpy.celtypes as ct
import celpy.evaluation as cel_eval
import lark

from .errors import FieldError, go_quote

MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "dyn"})
ROOT = "<nil>"


class UnsupportedRule(RuntimeError):
    """A CRD rule this server cannot evaluate: the server refuses to start."""


# --- Kubernetes extension functions ---------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1, "k": 10**3,
            "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def _parse_quantity(text: str) -> Fraction | None:
    import re

    match = re.fullmatch(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?",
                         str(text))
    if not match:
        return None
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource.Quantity value in CEL."""

    value: Fraction
    text: str = field(compare=False)


def _quantity(text: Any) -> Quantity:
    parsed = _parse_quantity(str(text))
    if parsed is None:
        raise ValueError("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    return Quantity(parsed, str(text))


def _as_fraction(value: Any) -> Fraction:
    return value.value if isinstance(value, Quantity) else Fraction(int(value))


def _compare(a: Quantity, b: Quantity) -> int:
    return (a.value > b.value) - (a.value < b.value)


def _asInteger(q: Quantity) -> ct.IntType:
    if q.value.denominator != 1:
        raise ValueError("cannot convert value to integer")
    return ct.IntType(int(q.value))


def _index_of(target: Any, item: Any) -> ct.IntType:
    if isinstance(target, str):
        return ct.IntType(str(target).find(str(item)))
    for index, value in enumerate(target):
        if value == item:
            return ct.IntType(index)
    return ct.IntType(-1)


def _last_index_of(target: Any, item: Any) -> ct.IntType:
    if isinstance(target, str):
        return ct.IntType(str(target).rfind(str(item)))
    for index in range(len(target) - 1, -1, -1):
        if target[index] == item:
            return ct.IntType(index)
    return ct.IntType(-1)


def _sum(items: Any) -> Any:
    total: Any = None
    for item in items:
        total = item if total is None else total + item
    return total if total is not None else ct.IntType(0)


def _extreme(pick: Callable[..., Any]) -> Callable[[Any], Any]:
    def run(items: Any) -> Any:
        if not len(items):
            raise ValueError("min/max of an empty list")
        return pick(items)

    return run


EXTENSIONS: dict[str, Callable[..., Any]] = {
    # quantity library
    "quantity": _quantity,
    "isQuantity": lambda text: ct.BoolType(_parse_quantity(str(text)) is not None),
    "isGreaterThan": lambda a, b: ct.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: ct.BoolType(_compare(a, b) < 0),
    "compareTo": lambda a, b: ct.IntType(_compare(a, b)),
    "add": lambda a, b: Quantity(a.value + _as_fraction(b), ""),
    "sub": lambda a, b: Quantity(a.value - _as_fraction(b), ""),
    "asInteger": _asInteger,
    "asApproximateFloat": lambda q: ct.DoubleType(float(q.value)),
    "isInteger": lambda q: ct.BoolType(q.value.denominator == 1),
    "sign": lambda q: ct.IntType((q.value > 0) - (q.value < 0)),
    # lists library
    "isSorted": lambda items: ct.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1))),
    "sum": _sum,
    "min": _extreme(min),
    "max": _extreme(max),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    # strings
    "lowerAscii": lambda s: ct.StringType(str(s).lower()),
    "upperAscii": lambda s: ct.StringType(str(s).upper()),
    "trim": lambda s: ct.StringType(str(s).strip()),
    "replace": lambda s, old, new, *n: ct.StringType(str(s).replace(str(old), str(new), *(int(x) for x in n))),
    "split": lambda s, sep, *n: ct.ListType([ct.StringType(p) for p in (
        str(s).split(str(sep), int(n[0]) - 1) if n and int(n[0]) > 0 else str(s).split(str(sep)))]),
    "join": lambda items, *sep: ct.StringType((str(sep[0]) if sep else "").join(str(i) for i in items)),
    "substring": lambda s, start, *end: ct.StringType(str(s)[int(start): int(end[0]) if end else None]),
    "charAt": lambda s, i: ct.StringType(str(s)[int(i)] if int(i) < len(str(s)) else ""),
}
KNOWN_FUNCTIONS = frozenset(cel_eval.base_functions) | MACROS | frozenset(EXTENSIONS)


# --- compilation ----------------------------------------------------------------------

@dataclass
class CompiledRule:
    rule: str
    message: str | None
    message_expression: Any
    field_path: str | None
    reason: str | None
    uses_old_self: bool
    optional_old_self: bool
    program: Any


@dataclass
class SchemaNode:
    """One schema node with its compiled rules and its children (for walking objects)."""

    type: str
    rules: list[CompiledRule]
    properties: dict[str, "SchemaNode"]
    additional: "SchemaNode | None"
    items: "SchemaNode | None"
    list_type: str | None
    map_keys: tuple[str, ...]
    has_rules_below: bool


_ENV = celpy.Environment()


def _functions_used(tree: lark.Tree) -> set[str]:
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data in ("member_dot_arg", "ident_arg"):
            for child in node.children:
                if isinstance(child, lark.Token):
                    names.add(str(child))
                    break
    return names


def _idents(tree: lark.Tree) -> set[str]:
    return {str(t) for node in tree.iter_subtrees() if node.data == "ident" for t in node.children
            if isinstance(t, lark.Token)}


def compile_rule(text: str, where: str) -> tuple[Any, bool]:
    """(program, uses oldSelf); UnsupportedRule when it does not parse or calls an unknown function."""
    try:
        tree = _ENV.compile(text)
    except Exception as error:  # celpy raises CELParseError
        raise UnsupportedRule(f"{where}: rule {text!r} does not compile: {error}") from None
    unknown = sorted(_functions_used(tree) - KNOWN_FUNCTIONS)
    if unknown:
        raise UnsupportedRule(f"{where}: rule {text!r} calls {', '.join(unknown)}, which this server cannot evaluate")
    return _ENV.program(tree, functions=EXTENSIONS), "oldSelf" in _idents(tree)


def _compile_node(schema: dict[str, Any], where: str) -> SchemaNode:
    rules = []
    for entry in schema.get("x-kubernetes-validations") or []:
        program, uses_old = compile_rule(entry["rule"], where)
        message_expression = None
        if entry.get("messageExpression"):
            message_expression, _ = compile_rule(entry["messageExpression"], where)
        rules.append(CompiledRule(
            entry["rule"], entry.get("message"), message_expression, entry.get("fieldPath"), entry.get("reason"),
            uses_old, bool(entry.get("optionalOldSelf")), program))
    properties = {k: _compile_node(v, f"{where}.{k}") for k, v in (schema.get("properties") or {}).items()}
    extra = schema.get("additionalProperties")
    additional = _compile_node(extra, f"{where}[*]") if isinstance(extra, dict) else None
    items = _compile_node(schema["items"], f"{where}[*]") if isinstance(schema.get("items"), dict) else None
    below = bool(rules) or any(p.has_rules_below for p in properties.values()) or bool(
        additional and additional.has_rules_below) or bool(items and items.has_rules_below)
    return SchemaNode(schema.get("type", ""), rules, properties, additional, items,
                      schema.get("x-kubernetes-list-type"), tuple(schema.get("x-kubernetes-list-map-keys") or ()), below)


_COMPILED: dict[tuple[int, str], tuple[dict[str, Any], SchemaNode]] = {}


def compile_crd(crd: dict[str, Any]) -> dict[str, SchemaNode]:
    """version -> compiled schema tree, for every served version; raises UnsupportedRule."""
    out = {}
    for version in crd["spec"]["versions"]:
        if not version.get("served", True):
            continue
        key = (id(crd), version["name"])
        cached = _COMPILED.get(key)
        if cached is None or cached[0] is not crd:
            where = f"{crd['spec']['names']['kind']}.{crd['spec']['group']}/{version['name']}"
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            cached = (crd, _compile_node(schema, where))
            _COMPILED[key] = cached
        out[version["name"]] = cached[1]
    return out


# --- evaluation -----------------------------------------------------------------------

_ABSENT = object()


@dataclass
class RuleResults:
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _child(path: str, name: str) -> str:
    return name if path == ROOT else f"{path}.{name}"


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


def _index(path: str, index: int) -> str:
    return f"[{index}]" if path == ROOT else f"{path}[{index}]"


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    view = dict(obj)
    meta = obj.get("metadata") or {}
    view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def validate(node: SchemaNode, obj: dict[str, Any], old: dict[str, Any] | None) -> RuleResults:
    """Every rule of the tree on `obj` (and `old` for an update)."""
    results = RuleResults()
    old_root: Any = _root_view(old) if old is not None else _ABSENT
    # Ratcheting: the root correlates with the old root.
    _walk(node, _root_view(obj), old_root, ROOT, True, False, results)
    return results


def _walk(node: SchemaNode, value: Any, old: Any, path: str, correlatable: bool, parent_equal: bool,
          results: RuleResults) -> None:
    if value is None or not node.has_rules_below:
        return
    if correlatable:
        unchanged = old is not _ABSENT and old == value
    else:
        unchanged = parent_equal
    if node.rules:
        _run_rules(node, value, old, path, unchanged, results)
    if isinstance(value, dict):
        if node.properties:
            for name, child in node.properties.items():
                if name in value:
                    child_old = old.get(name, _ABSENT) if isinstance(old, dict) else _ABSENT
                    _walk(child, value[name], child_old, _child(path, name),
                          correlatable and child_old is not _ABSENT, unchanged, results)
        elif node.additional is not None:
            for key, item in value.items():
                child_old = old.get(key, _ABSENT) if isinstance(old, dict) else _ABSENT
                _walk(node.additional, item, child_old, _key(path, key),
                      correlatable and child_old is not _ABSENT, unchanged, results)
    elif isinstance(value, list) and node.items is not None:
        old_by_key: dict[tuple[Any, ...], Any] = {}
        if node.list_type == "map" and isinstance(old, list) and correlatable:
            for item in old:
                if isinstance(item, dict):
                    old_by_key[tuple(item.get(k) for k in node.map_keys)] = item
        for index, item in enumerate(value):
            if node.list_type == "map" and isinstance(item, dict) and correlatable:
                item_old = old_by_key.get(tuple(item.get(k) for k in node.map_keys), _ABSENT)
                _walk(node.items, item, item_old, _index(path, index), item_old is not _ABSENT, unchanged, results)
            else:
                _walk(node.items, item, _ABSENT, _index(path, index), False, unchanged, results)


def _run_rules(node: SchemaNode, value: Any, old: Any, path: str, unchanged: bool, results: RuleResults) -> None:
    activation = {"self": celpy.json_to_cel(value)}
    if old is not _ABSENT:
        activation["oldSelf"] = celpy.json_to_cel(old)
    for rule in node.rules:
        if rule.uses_old_self and old is _ABSENT:
            if not rule.optional_old_self:
                continue
            activation = dict(activation, oldSelf=None)
        error = _evaluate(rule, node, activation, path)
        if error is None:
            continue
        if not rule.uses_old_self and unchanged:
            results.warnings.append(str(error))
        else:
            results.errors.append(error)


def _evaluate(rule: CompiledRule, node: SchemaNode, activation: dict[str, Any], path: str) -> FieldError | None:
    rule_text = rule.rule.strip()
    try:
        result = rule.program.evaluate(activation)
    except celpy.CELEvalError as error:
        return FieldError(path, "FieldValueInvalid",
                          f"Invalid value: {go_quote(node.type)}: {_eval_message(error)} evaluating rule: {rule_text}")
    if isinstance(result, celpy.CELEvalError):
        return FieldError(path, "FieldValueInvalid",
                          f"Invalid value: {go_quote(node.type)}: {_eval_message(result)} evaluating rule: {rule_text}")
    if result is True or (isinstance(result, ct.BoolType) and bool(result)):
        return None
    detail = rule.message or f"failed rule: {rule_text}"
    if rule.message_expression is not None:
        try:
            text = rule.message_expression.evaluate(activation)
            if isinstance(text, str) and text.strip():
                detail = str(text)
        except celpy.CELEvalError:
            pass
    where = path
    if rule.field_path:
        suffix = rule.field_path.lstrip(".")
        where = suffix if path == ROOT else f"{path}.{suffix}"
    reason = rule.reason or "FieldValueInvalid"
    if reason == "FieldValueForbidden":
        return FieldError(where, reason, f"Forbidden: {detail}")
    if reason == "FieldValueRequired":
        return FieldError(where, reason, f"Required value: {detail}")
    if reason == "FieldValueDuplicate":
        return FieldError(where, reason, f"Duplicate value: {go_quote(node.type)}")
    return FieldError(where, "FieldValueInvalid", f"Invalid value: {go_quote(node.type)}: {detail}")


def _eval_message(error: Any) -> str:
    args = getattr(error, "args", ())
    text = str(args[0]) if args else str(error)
    if "no such member in mapping" in text:
        name = text.rpartition(":")[2].strip().strip("'\"")
        return f"no such key: {name}"
    if text.startswith("no such overload") or "no matching overload" in text:
        return "no such overload"
    return text

