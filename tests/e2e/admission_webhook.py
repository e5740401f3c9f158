"""A real admission webhook for the end-to-end tests on the real cluster: it sees every RayJob create in the
namespaces made for it, records it, and denies it where a test says so.

Why: the real kube-apiserver offers no hook into one request. A test that must know whether raybridge
even tried to create a RayJob (a refusal "before anything is created"), or that needs the API server to
refuse one as a cluster's policy webhook does, registers this webhook instead: a small HTTPS server on
loopback (its certificate from a CA of its own, testcluster.pki) that the API server calls through a
MutatingWebhookConfiguration. Mutating webhooks are called before the object's schema is validated, so an
attempt the API server would refuse anyway is recorded too. A denial is the webhook's AdmissionReview
answer; the API server turns it into its own error, `admission webhook "<name>" denied the request: ...`,
with the code and reason the webhook gave.

What it does not do: no patches (every request it allows goes on unchanged), no kinds or operations but
RayJob CREATEs, and no namespaces but those it labelled (`namespace()`), so other tests on the shared
cluster never pass through it.
"""

from __future__ import annotations

import json
import shutil
import ssl
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

__all__ = ["AdmissionWebhook"]

ADMISSION_API = "admissionregistration.k8s.io/v1"
#: The namespace label the webhook's namespaceSelector matches (its value: the webhook's own suffix).
LABEL = "raybridge.test/admission-webhook"


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        request = review.get("request") or {}
        answer = {"uid": request.get("uid", ""), "allowed": True}
        denial = self.server.webhook.answer(request)
        if denial is not None:
            code, reason, message = denial
            answer = {"uid": request.get("uid", ""), "allowed": False, "status": {"code": code, "reason": reason, "message": message}}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    webhook: "AdmissionWebhook"


class AdmissionWebhook:
    """The webhook server and its MutatingWebhookConfiguration on the cluster `client` reaches; `stop()` removes both."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.suffix = uuid.uuid4().hex[:6]
        #: The name the API server gives the webhook in a denial's message.
        self.name = f"rayjobs-{self.suffix}.policy.example.com"
        self.configuration = f"raybridge-test-{self.suffix}"
        self._lock = threading.Lock()
        self._creates: list[tuple[str, str]] = []
        self._denials: dict[str, tuple[int, str, str]] = {}
        self._directory = Path(tempfile.mkdtemp(prefix="admission-webhook-"))
        self._server: Optional[_Server] = None

    # -- what tests use -----------------------------------------------------------------------
    def namespace(self) -> str:
        """A new namespace whose RayJob creates pass through this webhook."""
        name = f"team-{uuid.uuid4().hex[:6]}"
        self.client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {LABEL: self.suffix}}})
        return name

    def deny(self, namespace: str, code: int, reason: str, message: str) -> None:
        """From now on, refuse every RayJob create in `namespace` with this HTTP code, reason and message."""
        with self._lock:
            self._denials[namespace] = (code, reason, message)

    def created_in(self, namespace: str) -> list[str]:
        """The names of the RayJobs the API server was asked to create in `namespace` (denied ones too)."""
        with self._lock:
            return [name for ns, name in self._creates if ns == namespace]

    def answer(self, request: dict[str, Any]) -> Optional[tuple[int, str, str]]:
        namespace = request.get("namespace") or ""
        name = request.get("name") or ((request.get("object") or {}).get("metadata") or {}).get("name") or ""
        with self._lock:
            self._creates.append((namespace, name))
            return self._denials.get(namespace)

    # -- life cycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> "AdmissionWebhook":
        """Serve, register, and wait until the API server calls the webhook (its configuration is read
        asynchronously): a dry-run create in a namespace of its own, until the webhook records it."""
        from testcluster.pki import Pki

        pki = Pki(self._directory / "pki")
        serving = pki.serving("webhook", ("127.0.0.1",))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.webhook = self
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, name="admission-webhook", daemon=True).start()
        port = self._server.server_address[1]
        self.client.create_object(self._configuration(f"https://127.0.0.1:{port}/rayjobs", pki.ca_data))
        self._wait_until_called(timeout)
        return self

    def stop(self) -> None:
        try:
            self.client.delete_object(ADMISSION_API, "MutatingWebhookConfiguration", self.configuration)
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None
            shutil.rmtree(self._directory, ignore_errors=True)

    def _configuration(self, url: str, ca_bundle: str) -> dict[str, Any]:
        return {
            "apiVersion": ADMISSION_API,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.configuration},
            "webhooks": [
                {
                    "name": self.name,
                    "clientConfig": {"url": url, "caBundle": ca_bundle},
                    "rules": [{"apiGroups": ["ray.io"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["rayjobs"]}],
                    "namespaceSelector": {"matchLabels": {LABEL: self.suffix}},
                    # Fail: a create the webhook could not see is refused, never left unrecorded.
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 10,
                }
            ],
        }

    def _wait_until_called(self, timeout: float) -> None:
        from kubernetes import client as k8s

        probe = self.namespace()
        body = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "probe", "namespace": probe}, "spec": {"entrypoint": "true"}}
        deadline = time.monotonic() + timeout
        with self.client.api_client() as api_client:
            api = k8s.CustomObjectsApi(api_client)
            while not self.created_in(probe):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the API server did not call webhook {self.name} within {timeout:.0f} s")
                try:
                    api.create_namespaced_custom_object("ray.io", "v1", probe, "rayjobs", body, dry_run="All")
                except k8s.ApiException:
                    pass  # refused (the webhook not answering yet, say): asked again below
                time.sleep(0.2)
        self.client.delete_object("v1", "Namespace", probe)
