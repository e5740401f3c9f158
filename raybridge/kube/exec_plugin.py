"""A kubeconfig's exec credential plugin, run with a bound on how long it may take.

The kubernetes client runs the plugin (`users[].user.exec`: `aws eks get-token`, `gke-gcloud-auth-plugin`,
`kubelogin`, ...) while it loads the kubeconfig, and again when the token it gave expires, with
`subprocess.Popen(...).communicate()` and no timeout (kubernetes@37 config/exec_provider.py
`ExecProvider.run`): a plugin that hangs (a token endpoint that never answers, a login waiting for a
browser nobody sees) hung every command for ever. `install(timeout)` puts `BoundedExecProvider` in the
name the loader uses (config/kube_config.py imports `ExecProvider` into its own namespace and calls it
in `KubeConfigLoader._load_from_exec_plugin`). It runs the plugin as upstream does (the same
ExecCredential request in KUBERNETES_EXEC_INFO, the same checks of the answer), but waits at most the
command's request timeout (at least `INTERACTIVE_SECONDS` when the plugin may ask the user on a
terminal); past it the plugin and what it started are killed and the loader is told why, which the
command reports as exit 3 naming the plugin (`kube.client.connect_target`).

It does not bound the legacy GCP `auth-provider` `cmd-path` (kube_config.py CommandTokenSource), which
kubectl itself has dropped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Optional

#: The least a plugin that may talk to the user (stdout is a terminal: it may ask for a password or wait for a
#: browser login) is given, whatever the request timeout.
INTERACTIVE_SECONDS = 300.0
#: How long a killed plugin is waited for.
KILLED_WAIT_SECONDS = 5.0


def install(timeout: float) -> None:
    """Make the kubernetes client run exec credential plugins bounded by `timeout` seconds from now on."""
    from kubernetes.config import kube_config

    provider = _bounded_provider_class()
    provider.timeout = timeout
    kube_config.ExecProvider = provider  # type: ignore[attr-defined]


_provider: Optional[type] = None


def _bounded_provider_class() -> type:
    """`BoundedExecProvider`, made once (its base class is the client's, imported only when a kubeconfig is loaded)."""
    global _provider
    if _provider is None:
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.exec_provider import ExecProvider

        class BoundedExecProvider(ExecProvider):  # type: ignore[misc,valid-type]
            """kubernetes' ExecProvider whose `run` waits at most `timeout` seconds for the plugin."""

            timeout: float = 30.0

            def run(self, previous_response: Any = None) -> Any:
                # As upstream's run (kubernetes@37 config/exec_provider.py), with the wait bounded.
                interactive = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
                request: dict[str, Any] = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": interactive}}
                if previous_response:
                    request["spec"]["response"] = previous_response
                if self.cluster:
                    request["spec"]["cluster"] = self.cluster.value
                    for extension in self.cluster.value.get("extensions") or []:
                        if extension["name"] == "client.authentication.k8s.io/exec":
                            request["spec"]["cluster"]["config"] = extension["extension"]
                            break
                self.env["KUBERNETES_EXEC_INFO"] = json.dumps(request)
                bound = max(self.timeout, INTERACTIVE_SECONDS) if interactive else self.timeout
                process = subprocess.Popen(
                    self.args, stdout=subprocess.PIPE, stderr=sys.stderr if interactive else subprocess.PIPE,
                    stdin=sys.stdin if interactive else None, cwd=self.cwd, env=self.env, universal_newlines=True,
                    shell=getattr(self, "shell", False),
                    start_new_session=not interactive,  # its own group, killed whole; on a terminal it must keep it
                )  # fmt: skip
                try:
                    stdout, stderr = process.communicate(timeout=bound)
                except subprocess.TimeoutExpired:
                    _kill(process, group=not interactive)
                    raise ConfigException(
                        f"exec: plugin {self.args[0]!r} did not answer within {bound:g}s (killed; --request-timeout sets the bound)"
                    ) from None
                if process.returncode != 0:
                    message = f"exec: process returned {process.returncode}"
                    if (stderr or "").strip():
                        message += f". {stderr.strip()}"
                    raise ConfigException(message)
                try:
                    data = json.loads(stdout)
                except (ValueError, RecursionError) as exc:
                    raise ConfigException(f"exec: failed to decode process output: {exc}") from None
                for key in ("apiVersion", "kind", "status"):
                    if not isinstance(data, dict) or key not in data:
                        raise ConfigException(f"exec: malformed response. missing key '{key}'")
                if data["apiVersion"] != self.api_version:
                    raise ConfigException(f"exec: plugin api version {data['apiVersion']} does not match {self.api_version}")
                return data["status"]

        _provider = BoundedExecProvider
    return _provider


def _kill(process: "subprocess.Popen[str]", group: bool) -> None:
    """SIGKILL the plugin (and its process group, when it has one of its own), then reap it, bounded: what it started
    may still hold its pipes, so they are closed, not read to their end."""
    try:
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:
        pass
    for stream in (process.stdout, process.stderr):
        try:
            if stream is not None and stream is not sys.stderr:
                stream.close()
        except OSError:
            pass
    try:
        process.wait(KILLED_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        pass
