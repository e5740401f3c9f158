"""What keeps a pod from running, in one phrase: an image that cannot be pulled, a crash loop, no node for it.

While a Ray cluster starts, its head and worker pods are the only place that tells a slow start (an image
being pulled, nodes being added) from one that will never end (an image that does not exist, a container
that crashes at once, a pod no node can take). The kubelet writes those as a container's `state.waiting.reason`
(kubernetes@v1.34 pkg/kubelet/images/types.go: ErrImagePull, ImagePullBackOff, InvalidImageName,
ErrImageNeverPull; pkg/kubelet/container/sync_result.go: CrashLoopBackOff, CreateContainerConfigError,
CreateContainerError, RunContainerError), the scheduler as the `PodScheduled` condition's reason
(`Unschedulable`). `pod_trouble` reads one pod; `pods_trouble` says the first few of a set in a phrase.

Pure: no I/O. It does not decide what to do about a trouble (wait on, or give up): the caller does.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from raybridge.core.printable import one_line
from raybridge.core.views import Pod, as_list, is_object

#: The waiting reasons that mean the container will not start by itself soon (a pull that failed, a crash loop,
#: a config that cannot be made); others (ContainerCreating, PodInitializing) are a start under way.
TROUBLE_REASONS = (
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CrashLoopBackOff",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
)  # fmt: skip
#: The reasons among those that no retry can mend: the image name is invalid, or the node may never pull it.
PERMANENT_REASONS = ("InvalidImageName", "ErrImageNeverPull")
#: How many pods a line names before it counts the rest.
SHOWN_PODS = 2
MESSAGE_CHARS = 160


def pod_trouble(pod: Pod) -> Optional[str]:
    """"reason: message" of what keeps this pod from running, None when nothing does (or it is being deleted)."""
    if pod.meta.deleting or pod.finished:
        return None
    for key in ("initContainerStatuses", "containerStatuses"):
        for status in as_list(pod.status.get(key)):
            waiting = ((status.get("state") or {}).get("waiting") or {}) if is_object(status) else {}
            reason = waiting.get("reason") if is_object(waiting) else None
            if reason in TROUBLE_REASONS:
                return _words(str(reason), waiting.get("message"), _restarts(status))
    scheduled = pod.condition("PodScheduled")
    if scheduled is not None and not scheduled.true and scheduled.reason == "Unschedulable":
        return _words("Unschedulable", scheduled.message, "")
    return None


def _restarts(status: Any) -> str:
    count = status.get("restartCount") if is_object(status) else None
    return f"{count} restarts" if isinstance(count, int) and not isinstance(count, bool) and count > 0 else ""


def _words(reason: str, message: Any, restarts: str) -> str:
    text = one_line(" ".join(str(message or "").split()))  # a kubelet message on several lines reads as one
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 3] + "..."
    detail = "; ".join(part for part in (text, restarts) if part)
    return f"{reason}" + (f" ({detail})" if detail else "")


def pods_trouble(pods: Iterable[Pod]) -> list[tuple[str, str]]:
    """(pod name, trouble) of each troubled pod, by name."""
    found = [(pod.meta.name, trouble) for pod in pods for trouble in (pod_trouble(pod),) if trouble]
    return sorted(found)


def trouble_words(troubles: list[tuple[str, str]]) -> str:
    """The troubles in one phrase: the first SHOWN_PODS pods named, the others counted ("" when none)."""
    if not troubles:
        return ""
    shown = [f"pod {name}: {trouble}" for name, trouble in troubles[:SHOWN_PODS]]
    more = len(troubles) - SHOWN_PODS
    return "; ".join(shown) + (f" (and {more} more pod{'s' if more != 1 else ''})" if more > 0 else "")


def permanent(troubles: list[tuple[str, str]]) -> Optional[str]:
    """The first trouble no retry mends (`PERMANENT_REASONS`), as "pod NAME: reason (...)", None when there is none."""
    for name, trouble in troubles:
        if trouble.split(" ", 1)[0] in PERMANENT_REASONS:
            return f"pod {name}: {trouble}"
    return None


__all__ = ["PERMANENT_REASONS", "TROUBLE_REASONS", "permanent", "pod_trouble", "pods_trouble", "trouble_words"]
