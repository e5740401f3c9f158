"""One rule for "the same pod, listed again": every command that counts pods counts each once.

A pod list read from a file can hold a pod twice (two `kubectl get` outputs
joined, a list edited by hand); the API server holds one pod per namespace and
name, and one per uid. So an entry is a repeat of an earlier one when it has
the same namespace and name, or the same uid: the first counts, each repeat is
left out with one sentence naming it. Entries without a usable name or uid
cannot be matched and pass through, as do entries that are not objects (the
caller says what is wrong with those). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from raybridge.core.views import Pod


class SeenPods:
    """The pods met so far; `repeat(pod)` says whether this one was met before, and records it."""

    def __init__(self) -> None:
        self._by_name: set[tuple[str, str]] = set()
        self._by_uid: dict[str, str] = {}

    def repeat(self, pod: Mapping[str, Any]) -> Optional[str]:
        """None the first time a pod is met; else the sentence that says it is counted once."""
        meta = pod.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
        namespace = namespace if isinstance(namespace, str) else "" if namespace is None else None
        by_name = (namespace, name) if namespace is not None and isinstance(name, str) and name else None
        by_uid = uid if isinstance(uid, str) and uid else None
        shown = f"pod {namespace or '?'}/{name}" if by_name else f"a pod with uid {uid!r}"
        if by_name is not None and by_name in self._by_name:
            return f"{shown} is listed more than once: counted once"
        if by_uid is not None and by_uid in self._by_uid:
            return f"{shown} has the uid of {self._by_uid[by_uid]}, listed before: counted once"
        if by_name is not None:
            self._by_name.add(by_name)
        if by_uid is not None:
            self._by_uid[by_uid] = shown
        return None


def first_listings(pods: Iterable[Any]) -> tuple[list[Any], list[str]]:
    """`pods` (objects, or their views) without repeats (the first listing of each kept, in order), and one sentence
    per repeat."""
    seen = SeenPods()
    kept: list[Any] = []
    repeats: list[str] = []
    for pod in pods:
        obj = pod.obj if isinstance(pod, Pod) else pod
        if isinstance(obj, dict):
            repeat = seen.repeat(obj)
            if repeat is not None:
                repeats.append(repeat)
                continue
        kept.append(pod)
    return kept, repeats
