"""Connecting to a cluster: the `ApiClient` whose every call is bounded and retried, and the `Kube` handle.

One place (`BoundedApiClient.call_api`) bounds every request by `--request-timeout` and the
command's `Deadline` and retries what is safe to retry (`kube.retry.RetryPolicy`; calls made
inside `kube.retry.calls_tried_once()` are tried once, their caller retries). What it does not
do: retry a create or an update (the caller knows whether a write that may have happened can be
re-read: `rayapi.RayObjects.create`), or wait for a state (the launcher's `Waiter` does). Which
cluster is `kube.config`'s business, what a failure means `kube.calls`'.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.deadline import Deadline
from raybridge.errors import BadInput, ClusterUnreachable
from raybridge.kube.calls import TimeBudgetSpent, describe_unreachable, failure_kind, short_error, short_text
from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT, KubeTarget, resolve_kube_target
from raybridge.kube.retry import DEFAULT_RETRY_POLICY, RETRIED_METHODS, TRANSIENT_STATUSES, RetryPolicy, client_retries
from raybridge.kube.retry import retry_after_seconds


def _streams(url: str) -> bool:
    lowered = url.lower()
    return "watch=true" in lowered or "follow=true" in lowered or "/watch/" in lowered


def _bounded_api_client(configuration: Any, request_timeout: float, policy: RetryPolicy = DEFAULT_RETRY_POLICY) -> Any:
    """An ApiClient whose every call is bounded (connect and read) by request_timeout and the deadline, and retried per `policy`."""
    from kubernetes import client
    from urllib3.exceptions import HTTPError as Urllib3Error

    # urllib3 would otherwise retry on its own, multiplying the bound; the policy here decides.
    configuration.retries = 0

    class BoundedApiClient(client.ApiClient):  # type: ignore[misc,valid-type]
        deadline: Optional[Deadline] = None
        server: str = configuration.host
        attempts = threading.local()

        def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            asked = kwargs.get("_request_timeout")
            base = request_timeout if asked is None else (asked if isinstance(asked, (int, float)) else max(asked))
            retried = kwargs.pop("_retry", True) and client_retries() and method.upper() in RETRIED_METHODS and not _streams(url)
            attempt = 0
            unreachable_since: Optional[float] = None
            while True:
                attempt += 1
                deadline = self.deadline
                timeout = deadline.bound(base) if deadline is not None else base
                kwargs["_request_timeout"] = (timeout, timeout)
                self.attempts.count = attempt
                try:
                    response = super().call_api(method, url, *args, **kwargs)
                    if retried:
                        response.read()  # a body cut short is a failure to retry, not a surprise later
                except (Urllib3Error, OSError) as exc:
                    kind = failure_kind(exc)
                    if kind == "connection" and unreachable_since is None:
                        unreachable_since = time.monotonic()
                    failing = (time.monotonic() - unreachable_since, base) if unreachable_since is not None else None
                    wait = policy.wait_before_retry(attempt, kind, deadline, unreachable_for=failing) if retried else None
                    if wait is None:
                        if deadline is not None and kind == "timeout" and deadline.cuts(base + 0.01):
                            raise TimeBudgetSpent(
                                f"{describe_unreachable(exc)}, and the command's --timeout of {deadline.seconds:g}s ran out"
                            ) from None
                        raise
                    time.sleep(wait)
                    continue
                status = getattr(response, "status", 200)
                if retried and status in TRANSIENT_STATUSES:
                    wait = policy.wait_before_retry(attempt, "status", deadline, retry_after_seconds(getattr(response, "headers", None) or {}))
                    if wait is not None:
                        time.sleep(wait)
                        continue
                return response

    return BoundedApiClient(configuration)


@dataclass
class Kube:
    """A connected API client and the namespace commands default to."""

    api_client: Any
    namespace: str
    in_cluster: bool
    context: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    @property
    def server(self) -> str:
        return str(getattr(self.api_client, "server", None) or getattr(self.api_client.configuration, "host", ""))

    @property
    def deadline(self) -> Optional[Deadline]:
        """The command's time budget every call is bounded by (None: only `request_timeout`)."""
        return getattr(self.api_client, "deadline", None)

    @deadline.setter
    def deadline(self, value: Optional[Deadline]) -> None:
        self.api_client.deadline = value

    def core(self) -> Any:
        """core/v1, for raw-JSON calls without importing the client's CoreV1Api (`kube.core_api`)."""
        from raybridge.kube.core_api import core_api

        return core_api(self.api_client)

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)

    def scheduling(self) -> Any:
        from kubernetes import client

        return client.SchedulingV1Api(self.api_client)


class _CredentialFailures:
    """While loading a kubeconfig, what the client logs at ERROR (a failed exec plugin) is kept, not printed.

    kubernetes.config's loader reports a failing exec credential plugin only through
    `logging.error` and carries on without credentials; the module-level call would also
    configure the root logger and print `ERROR:root:...` on stderr.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._handler: Any = None

    def __enter__(self) -> "_CredentialFailures":
        import logging

        messages = self.messages

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                messages.append(record.getMessage())

        self._handler = Keep(logging.ERROR)
        logging.getLogger().addHandler(self._handler)
        return self

    def __exit__(self, *exc_info: object) -> None:
        import logging

        logging.getLogger().removeHandler(self._handler)


def connect_target(target: KubeTarget, deadline: Optional[Deadline] = None) -> Kube:
    """A fresh bounded ApiClient for a resolved target: the kubeconfig files merged (kubectl's rule), or in-cluster."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if not target.files:
        if not target.in_cluster:
            missing = " (KUBECONFIG names only files that do not exist)" if target.missing else ""
            raise ClusterUnreachable(f"no kubeconfig found (KUBECONFIG, ~/.kube/config) and not running in a cluster{missing}")
        config.load_incluster_config(client_configuration=configuration)
        kube = Kube(_bounded_api_client(configuration, target.request_timeout), target.namespace, True, None, target.request_timeout)
        kube.deadline = deadline
        return kube
    named = ", ".join(repr(str(p)) for p in target.files)
    from raybridge.kube import exec_plugin

    exec_plugin.install(target.request_timeout)  # the client would wait for an exec credential plugin for ever
    failures = _CredentialFailures()
    try:
        # The client merges a colon list as kubectl does (first file wins per cluster, context and
        # user); the context is passed explicitly because it would take the *last* current-context.
        with failures:
            config.load_kube_config(
                config_file=os.pathsep.join(str(p) for p in target.files), context=target.context, client_configuration=configuration
            )
    except ConfigException as exc:
        raise BadInput(f"kubeconfig {named}: {exc}") from None
    except Exception as exc:  # malformed YAML and the like
        raise BadInput(f"kubeconfig {named} cannot be loaded: {short_error(exc)}") from None
    if failures.messages and not (configuration.api_key or configuration.cert_file):
        # The user's exec credential plugin failed: the client only logs it and would go on as anonymous.
        raise ClusterUnreachable(f"kubeconfig {named}: getting credentials: {short_text(failures.messages[0])}")
    kube = Kube(
        _bounded_api_client(configuration, target.request_timeout), target.namespace, False, target.context, target.request_timeout
    )
    kube.deadline = deadline
    return kube


def connect(
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    namespace: Optional[str] = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    deadline: Optional[Deadline] = None,
) -> Kube:
    """Resolve the target (`resolve_kube_target`) and connect to it."""
    return connect_target(resolve_kube_target(kubeconfig, context, namespace, request_timeout), deadline)
