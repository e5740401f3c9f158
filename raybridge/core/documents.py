"""Parsing JSON and YAML text from the user, with bounds on what the parsed data may cost.

A 738-byte YAML file of nested aliases ("billion laughs") expands to billions
of values; a file nested 3,000 levels deep, or an integer of 5,000 digits,
makes the parsers raise RecursionError or ValueError instead of a YAML error.
Here every such document is refused with `BadInput` naming the file and what
is wrong, before anything walks the data: at most `MAX_DEPTH` levels of
nesting, at most `MAX_VALUES` values added by aliases (an alias repeats the
node it names: the document's values once aliases are expanded, less the values
written in it; counted on the parsed graph, where an alias is one shared node,
in time proportional to the text), only finite numbers, integers of at most
`MAX_INT_DIGITS` digits. A document without aliases (every JSON document) costs
what its text costs, whatever its size: `kubectl get pods -A -o json` of a large
cluster is millions of values, and the file's size is bounded where it is read.

YAML costs far more than JSON: every value becomes a node (with two position
marks) before it becomes data. It is parsed by libyaml (PyYAML's C loader, the
constructors staying PyYAML's own Python) where PyYAML has it and libyaml bounds
the nesting itself (probed once); the pure-Python loader, about three times
slower, only where not. Either way a YAML text longer than `MAX_YAML_CHARS` is
refused before it is parsed, so that its worst case stays within about 1.6 GiB
(`YAML_COST_PER_CHAR`); JSON keeps the file's bound, and a multi-document file
that is JSON is read as JSON.

It parses text it is given; reading files, and their size, is `raybridge.files`'s business.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Callable, Iterable, Optional

import yaml

from raybridge.errors import BadInput

MAX_DEPTH = 64
#: Values that aliases may add to a document (its expanded size less its written size).
MAX_VALUES = 1_000_000
#: Python's own bound on int <-> str conversion (sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300
#: The longest YAML text parsed, in characters (bytes, for ASCII text). YAML's worst case, a flow mapping of
#: one-character keys (`{a,a,a,...}`: two nodes, two marks each, per two characters), peaks at `YAML_COST_PER_CHAR`
#: bytes of memory per character and about 25 us with libyaml (about twice both without): some 1.6 GiB and 1.5
#: minutes here. A pod list as `kubectl get -o yaml` prints it (some 300 pods here) costs about 60 bytes and 1.3 us a
#: character.
#: JSON keeps the file's bound.
MAX_YAML_CHARS = 4 * 1024 * 1024
#: Peak memory per character of the costliest YAML text known, with libyaml (tests/unit/test_documents.py counts it).
YAML_COST_PER_CHAR = 400


def _shape_problem(root: Any, children: Callable[[Any], Iterable[Any]], is_container: Callable[[Any], bool]) -> str | None:
    """Too deep, or aliases that add too many values: the problem, or None. Iterative; shared nodes counted once per use."""
    # (expanded size, height) of each container already measured, by identity
    measured: dict[int, tuple[int, int]] = {}
    written = 0  # the values the text holds: each container once, with its scalar children
    stack: list[tuple[Any, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        if not is_container(node):
            continue
        key = id(node)
        if done:
            on_path.discard(key)
            size, height = 1, 1  # a container is one level, and one more than its deepest child
            written += 1
            for child in children(node):
                if is_container(child):
                    child_size, child_height = measured.get(id(child), (1, 0))
                else:
                    child_size, child_height = 1, 0
                    written += 1
                size += child_size
                height = max(height, child_height + 1)
            if height > MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep"
            if size - written > MAX_VALUES:
                return f"has aliases that add more than {MAX_VALUES:,} values once expanded"
            measured[key] = (size, height)
            continue
        if key in measured:
            continue
        if key in on_path:
            return "has an alias that refers to a node containing it"
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children(node) if is_container(child) and id(child) not in measured)
    return None


def _node_children(node: Any) -> Iterable[Any]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value


def _is_collection_node(node: Any) -> bool:
    return isinstance(node, yaml.CollectionNode)


def _value_children(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield item
    elif isinstance(value, list):
        yield from value


def _is_container(value: Any) -> bool:
    return isinstance(value, (dict, list))


def _number_problem(data: Any) -> str | None:
    """A number that is not finite (NaN, inf, 1e400 in JSON) anywhere in already-bounded data."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"holds a number that is not finite ({value})"
        if _is_container(value):
            stack.extend(_value_children(value))
    return None


def _parse_problem(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return f"is nested more than {MAX_DEPTH} levels deep"
    text = str(exc)
    if "digits" in text and "integer" in text:
        return f"holds an integer of more than {MAX_INT_DIGITS} digits"
    return "cannot be read: " + text.split("\n")[0][:200]


#: libyaml's refusal of a text nested deeper than its own bound (1000 levels; libyaml >= 0.2.5 scanner.c).
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
_yaml_loader: Optional[type] = None


def yaml_loader() -> type:
    """PyYAML's C loader (libyaml) when PyYAML has it and libyaml refuses deep nesting itself, else the pure-Python one.

    The C composer recurses in C, one level per level of nesting; a libyaml without a nesting bound (before 0.2.5)
    would let a text of nested brackets overflow the stack, so one bracket past libyaml's bound is tried once.
    """
    global _yaml_loader
    if _yaml_loader is None:
        _yaml_loader = yaml.SafeLoader
        loader_class = getattr(yaml, "CSafeLoader", None)
        if getattr(yaml, "__with_libyaml__", False) and loader_class is not None:
            probe = loader_class("[" * 1001 + "]" * 1001)
            try:
                probe.get_single_node()
            except Exception as exc:  # a ScannerError saying so; anything else: not this libyaml
                if _LIBYAML_TOO_DEEP in str(exc):
                    _yaml_loader = loader_class
            finally:
                probe.dispose()
    return _yaml_loader


def _yaml_documents(text: str, origin: str) -> list[Any]:
    loader = yaml_loader()(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            problem = _shape_problem(node, _node_children, _is_collection_node)
            if problem:
                raise BadInput(f"{origin} {problem}")
            try:
                documents.append(loader.construct_document(node))
            except (AttributeError, IndexError, KeyError, TypeError) as exc:  # PyYAML's constructors on a value its tag refuses
                raise BadInput(f"{origin} {_tagged_value_problem(node, loader) or 'cannot be read: ' + type(exc).__name__}") from None
    finally:
        loader.dispose()
    return documents


def _tagged_value_problem(root: Any, loader: Any) -> str | None:
    """Where a scalar whose explicit YAML tag (`!!timestamp x`, `!!bool x`) does not fit its text is, and what it is."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias shares its node
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            implicit = loader.resolve(yaml.ScalarNode, node.value, (True, False))
            if node.tag != implicit and node.tag.startswith("tag:yaml.org,2002:"):
                try:
                    loader.construct_object(node, deep=True)
                except (AttributeError, IndexError, KeyError, TypeError, ValueError, yaml.YAMLError):
                    mark, kind = node.start_mark, node.tag.rsplit(":", 1)[-1]
                    return f"is not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {node.value[:60]!r} is not a valid {kind}"
        else:
            stack.extend(reversed(list(_node_children(node))))
    return None


def _checked(data: Any, origin: str) -> Any:
    problem = _shape_problem(data, _value_children, _is_container) or _number_problem(data)
    if problem:
        raise BadInput(f"{origin} {problem}")
    return data


def load_yaml_documents(text: str, origin: str) -> list[Any]:
    """Every document of a YAML text (a JSON text is one document, read as JSON), each bounded; BadInput naming
    `origin` and what is wrong."""
    if text.lstrip()[:1] in ("{", "["):
        is_json, data = _json_document(text, origin)
        if is_json:
            return [data]
    _refuse_long_yaml(text, origin)
    try:
        documents = _yaml_documents(text, origin)
    except yaml.YAMLError as exc:
        if _LIBYAML_TOO_DEEP in str(exc):
            raise BadInput(f"{origin} is nested more than {MAX_DEPTH} levels deep") from None
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise BadInput(f"{origin} is not valid YAML{where}: {getattr(exc, 'problem', None) or 'cannot be parsed'}") from None
    except (RecursionError, ValueError, OverflowError) as exc:
        raise BadInput(f"{origin} {_parse_problem(exc)}") from None
    return [_checked(d, origin) for d in documents]


def _refuse_long_yaml(text: str, origin: str, not_json: str = "") -> None:
    """BadInput when `text` is too long to parse as YAML (`MAX_YAML_CHARS`); `not_json`: why it is not JSON."""
    if len(text) > MAX_YAML_CHARS:
        raise BadInput(
            f"{origin} is {'not valid JSON (' + not_json + ') and ' if not_json else ''}larger than {MAX_YAML_CHARS // 2**20} MiB, "
            f"more than raybridge reads as YAML (parsing YAML can take {YAML_COST_PER_CHAR} bytes of memory per byte); "
            "give it as JSON (`kubectl get -o json`)"
        )


def load_yaml(text: str, origin: str) -> Any:
    """The one document of a YAML text (None when empty), bounded."""
    documents = load_yaml_documents(text, origin)
    if len(documents) > 1:
        raise BadInput(f"{origin} holds {len(documents)} YAML documents; give one")
    return documents[0] if documents else None


class _NotFinite(Exception):
    """A JSON number that is not finite (NaN, Infinity, 1e400), found while parsing."""


def _refuse_constant(name: str) -> Any:
    raise _NotFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text[:40])
    return value


def _json_depth_problem(data: Any) -> str | None:
    """Nested more than MAX_DEPTH levels: the problem, or None. Walks containers only, level by level.

    JSON has no aliases, so its values cost what its text costs: only the depth is checked, and
    non-finite numbers are refused by the parser's own hooks; the full walk of `_shape_problem`
    would cost several times the parse on a large `kubectl get -o json`.
    """
    level = [data] if isinstance(data, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return f"is nested more than {MAX_DEPTH} levels deep"
        level = [v for container in level for v in (container.values() if type(container) is dict else container)
                 if type(v) is dict or type(v) is list]
    return None


_DEPTH_PROBES = ("[" * MAX_DEPTH + "]" * MAX_DEPTH, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
#: The recursion limit, above the caller's depth, at which the JSON parser refuses exactly what is nested more than
#: MAX_DEPTH levels; None: not found on this Python (from 3.12 the C parser's recursion has its own, fixed limit).
_depth_limit_offset: Optional[int] = None
_depth_limit_probed = False


def _stack_depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def _parse_bounded(text: str, offset: int) -> Any:
    """json.loads, its hooks refusing non-finite numbers, under a recursion limit `offset` frames above this caller
    (RecursionError: too deep)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + offset)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    finally:
        sys.setrecursionlimit(old)


def _probed_offset() -> Optional[int]:
    """The offset at which the parser takes MAX_DEPTH levels and refuses one more, found once by trying both."""
    global _depth_limit_offset, _depth_limit_probed
    if not _depth_limit_probed:
        _depth_limit_probed = True
        for offset in range(MAX_DEPTH, MAX_DEPTH + 32):
            try:
                _parse_bounded(_DEPTH_PROBES[0], offset)
            except RecursionError:
                continue
            try:
                _parse_bounded(_DEPTH_PROBES[1], offset)
            except RecursionError:
                _depth_limit_offset = offset
            break
    return _depth_limit_offset


def _json_fast(text: str) -> tuple[bool, Any]:
    """(True, data) when the parser itself kept the depth within MAX_DEPTH (no second pass over the data: on a large
    `kubectl get -o json` the walk cost more than the parse); (False, None) when the checked path must decide: a
    Python whose parser the recursion limit does not bound, other threads running (the recursion limit is the
    process's: lowered, it would bound theirs too), or a RecursionError here (too deep, or a number's hook called
    at the deepest level: rare, and the checked path tells them apart)."""
    if len(sys._current_frames()) > 1:  # other threads run
        return False, None
    offset = _probed_offset()
    if offset is None:
        return False, None
    try:
        return True, _parse_bounded(text, offset)
    except RecursionError:
        return False, None


def _json_document(text: str, origin: str) -> tuple[bool, Any]:
    """(True, the data) when `text` is JSON, bounded (BadInput beyond the bounds); (False, why not) when it is not
    JSON at all."""
    try:
        fast, data = _json_fast(text)
        if fast:
            return True, data
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite as exc:
        raise BadInput(f"{origin} holds a number that is not finite ({exc})") from None
    except RecursionError:
        raise BadInput(f"{origin} is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        if "digits" in str(exc) and "integer" in str(exc):
            raise BadInput(f"{origin} holds an integer of more than {MAX_INT_DIGITS} digits") from None
        return False, str(exc).split("\n")[0][:120]
    problem = _json_depth_problem(data)
    if problem:
        raise BadInput(f"{origin} {problem}")
    return True, data


def load_json_or_yaml(text: str, origin: str) -> Any:
    """JSON if it parses as JSON, else YAML; bounded either way."""
    is_json, data = _json_document(text, origin)
    if is_json:
        return data
    _refuse_long_yaml(text, origin, not_json=data if text.lstrip()[:1] in ("{", "[") else "")
    try:
        return load_yaml(text, origin)
    except BadInput as exc:
        if " is not valid YAML" in exc.problems[0]:
            raise BadInput(f"{origin} is neither JSON nor YAML") from None
        raise
