"""`adjuster run --metrics-bind-address` and `--health-probe-bind-address`: what they accept, what they refuse
(exit 2 naming the flag), and where the servers listen when neither is given: in a pod, every interface (the
kubelet and Prometheus connect to the pod's address); elsewhere, loopback and no probe server.

The servers themselves bound where the flags say are checked end to end in
tests/e2e/test_adjuster_metrics_bind.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raybridge.adjuster.decision.settings import RunSettings, parse_bind_address
from raybridge.cli.adjuster import run_settings_from_args
from raybridge.cli.main import build_parser
from raybridge.errors import BadInput

REPO = Path(__file__).resolve().parents[2]

GOOD = [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)),
    (":8080", ("", 8080)),
    ("0.0.0.0:9090", ("0.0.0.0", 9090)),
    ("[::1]:8080", ("::1", 8080)),
    ("localhost:8080", ("localhost", 8080)),
    ("0", ("", 0)),
    (":0", ("", 0)),
    ("127.0.0.1:65535", ("127.0.0.1", 65535)),
]

BAD = [
    ("8080", "HOST:PORT"),
    ("127.0.0.1:65536", "up to 65535"),
    ("127.0.0.1:", "digits"),
    ("127.0.0.1:-1", "digits"),
    ("127.0.0.1:80_80", "digits"),
    ("127.0.0.1:\u0668\u0660", "digits"),  # Arabic-Indic 80
    ("127.0.0.1:8080\n", "digits"),
    ("::1:8080", "brackets"),
    ("[localhost]:8080", "brackets"),
    ("bad host:8080", "IP address or a host name"),
    ("host\n:8080", "IP address or a host name"),
    ("-lead.example:8080", "IP address or a host name"),
]


@pytest.mark.parametrize("text,expected", GOOD)
def test_a_bind_address_is_read_as_controller_runtime_reads_it(text: str, expected: tuple[str, int]) -> None:
    assert parse_bind_address(text) == expected


@pytest.mark.parametrize("text,reason", BAD)
def test_a_bad_bind_address_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_bind_address(text)


@pytest.mark.parametrize("settings,reason", [
    (RunSettings(metrics_port=70000), "up to 65535"),
    (RunSettings(metrics_host="bad host"), "IP address or a host name"),
])
def test_settings_built_in_code_are_checked_by_the_same_rules(settings: RunSettings, reason: str) -> None:
    assert any("--metrics-bind-address" in p and reason in p for p in settings.problems()), settings.problems()


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "raybridge", "adjuster", "run", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args,env,expected", [
    (["--metrics-bind-address", "127.0.0.1:99999"], {}, "--metrics-bind-address"),
    (["--metrics-bind-address", "8080"], {}, "--metrics-bind-address"),
    ([], {"RAYBRIDGE_ADJUSTER_METRICS_BIND_ADDRESS": "::1:8080"}, "--metrics-bind-address"),
    (["--metrics-port", "\uff18\uff10"], {}, "--metrics-port"),  # full-width 80
    (["--metrics-bind-address", "127.0.0.1:8080", "--metrics-port", "8080"], {}, "not both"),
    (["--health-probe-bind-address", "8081"], {}, "--health-probe-bind-address"),
    ([], {"RAYBRIDGE_ADJUSTER_HEALTH_PROBE_BIND_ADDRESS": "127.0.0.1:99999"}, "--health-probe-bind-address"),
    (["--metrics-port", "9000", "--health-probe-bind-address", ":9000"], {}, "a port of their own"),
])
def test_the_cli_refuses_a_bad_metrics_address_with_exit_2_naming_the_flag(args: list[str], env: dict[str, str], expected: str) -> None:
    proc = _run(*args, "--kubeconfig", "/does/not/matter", env=env)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


def _settings(monkeypatch: pytest.MonkeyPatch, in_pod: bool, *flags: str) -> RunSettings:
    for name in ("KUBERNETES_SERVICE_HOST", "RAYBRIDGE_ADJUSTER_METRICS_BIND_ADDRESS", "RAYBRIDGE_ADJUSTER_METRICS_PORT",
                 "RAYBRIDGE_ADJUSTER_HEALTH_PROBE_BIND_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    if in_pod:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    argv = ["adjuster", "run", *flags]
    return run_settings_from_args(build_parser(argv).parse_args(argv))


# (case, in a pod, flags, (metrics host, port), (probe host, port))
DEFAULTS = [
    ("outside a pod: loopback, no probe server", False, [], ("127.0.0.1", 8080), ("", 0)),
    ("outside a pod, a port: loopback", False, ["--metrics-port", "9090"], ("127.0.0.1", 9090), ("", 0)),
    ("in a pod: every interface, probes on 8081", True, [], ("", 8080), ("", 8081)),
    ("in a pod, a port: every interface", True, ["--metrics-port", "9090"], ("", 9090), ("", 8081)),
    ("as told, anywhere", False, ["--metrics-bind-address", ":8080", "--health-probe-bind-address", "127.0.0.1:8081"],
     ("", 8080), ("127.0.0.1", 8081)),
    ("probes off in a pod", True, ["--health-probe-bind-address", "0"], ("", 8080), ("", 0)),
]


@pytest.mark.parametrize("case, in_pod, flags, metrics, probes", DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_where_the_servers_listen_by_default(monkeypatch: pytest.MonkeyPatch, case: str, in_pod: bool, flags: list[str],
                                            metrics: tuple[str, int], probes: tuple[str, int]) -> None:
    settings = _settings(monkeypatch, in_pod, *flags)
    assert ((settings.metrics_host, settings.metrics_port), (settings.probe_host, settings.probe_port)) == (metrics, probes)


def test_the_probes_cannot_share_the_metrics_port(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BadInput, match="a port of their own"):
        _settings(monkeypatch, True, "--metrics-bind-address", ":8081")
