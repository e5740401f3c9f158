"""PriorityClasses (scheduling.k8s.io/v1) as raybridge reads them: one's value.

The adjuster's start-up checks (`adjuster/preflight.py`) read the placeholders'
PriorityClass to compare it with the cluster autoscaler's cutoff. A class that
does not exist is None; one the user may not read is `PermissionDenied`, which
that caller can do without. What it does not do: map any other failure (an error
status stays the client's `ApiException`, a failed connection urllib3's error, for
the caller's `kube.calls.api_call`), retry (the bounded client does), or judge the value.
"""

from __future__ import annotations

from typing import Optional

from raybridge.kube.calls import PermissionDenied, status_message
from raybridge.kube.client import Kube


def read_priority_class_value(kube: Kube, name: str, timeout: float) -> Optional[int]:
    """The value of PriorityClass `name`; None when it does not exist (404); `PermissionDenied` on a 403."""
    from kubernetes.client.exceptions import ApiException

    try:
        found = kube.scheduling().read_priority_class(name, _request_timeout=(timeout, timeout))
    except ApiException as exc:
        if exc.status == 404:
            return None
        if exc.status == 403:
            raise PermissionDenied(f"reading PriorityClass {name}: permission denied ({status_message(exc)})") from None
        raise
    return int(found.value)
