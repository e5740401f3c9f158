"""The same flags and output values on every command, as a user types them: CLI in, output and exit status out."""

from __future__ import annotations

import json

import pytest

from tests.helpers import EXAMPLES, cli_env, run_cli

NODES = str(EXAMPLES / "cluster" / "nodes.json")
PODS = str(EXAMPLES / "cluster" / "pods.json")
QUEUES = str(EXAMPLES / "queues" / "node-pool-a.yaml")


def test_plan_prints_a_table_unless_asked_for_json() -> None:
    table = run_cli("plan", "--gpus", "16", "--gpu-vendor", "amd", "--nodes", NODES, "--", "python", "x.py")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["FIELD", "VALUE"]
    assert json.loads(run_cli("plan", "--gpus", "16", "--gpu-vendor", "amd", "--nodes", NODES, "-o", "json", "--", "python", "x.py").stdout)["totalGpus"] == 16


def test_adjuster_plan_prints_a_table_unless_asked_for_json() -> None:
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Placeholders (exact): ")


def test_adjuster_plan_manifests_are_yaml_unless_asked_for_json() -> None:
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, "--manifests")
    assert out.returncode == 0, out.stderr
    assert not out.stdout.startswith("{")


@pytest.mark.parametrize("command", [["queues", "fairshare", "--queues", QUEUES, "--capacity", "gpu=40"], ["queues", "generate", "--nodes", NODES]])
def test_queues_commands_take_the_cluster_flags_and_say_a_file_leaves_them_unused(command: list[str]) -> None:
    out = run_cli(*command, "-n", "team-a", "--context", "c", "--request-timeout", "5")
    assert out.returncode == 0, out.stderr
    assert "warning: --context, --request-timeout are ignored: the input is a file (--from-cluster reads the cluster)" in out.stderr


def test_explain_text_is_the_table_and_says_the_new_name(tmp_path) -> None:
    out = run_cli("explain", "job", "-o", "text", "--kubeconfig", str(tmp_path / "none"))
    assert out.returncode == 2  # the kubeconfig, not the -o value
    assert out.stderr.startswith("warning: -o text is deprecated; use -o table\n")


def test_adjuster_run_takes_n_for_its_namespace() -> None:
    out = run_cli("adjuster", "run", "-n", "Not_A_Namespace", timeout=60)
    assert out.returncode == 2
    assert "--namespace 'Not_A_Namespace'" in out.stderr and "Traceback" not in out.stderr


# (case, command line, the message on stderr)
USAGE_ERROR_ROWS = [
    ("mistyped command", ["sumbit", "x.yaml"], "; did you mean 'submit'?\n(see 'raybridge --help')\n"),
    ("mistyped subcommand", ["queues", "fairshar"], "; did you mean 'fairshare'?\n(see 'raybridge queues --help')\n"),
    ("mistyped flag points to its command", ["submit", "--gpuz", "3"], "error: unrecognized arguments: --gpuz; did you mean '--gpus'?\n(see 'raybridge submit --help')\n"),
    ("mistyped flag of a subcommand", ["adjuster", "plan", "--pods", PODS, "--polcy", "kai"], "did you mean '--policy'?\n(see 'raybridge adjuster plan --help')\n"),
    ("mistyped value", ["plan", "-o", "tabel"], "did you mean 'table'?\n(see 'raybridge plan --help')\n"),
]


@pytest.mark.parametrize("case,argv,message", USAGE_ERROR_ROWS, ids=[r[0] for r in USAGE_ERROR_ROWS])
def test_a_usage_error_suggests_and_points_to_the_command_s_help(case: str, argv: list[str], message: str) -> None:
    out = run_cli(*argv)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.endswith(message), out.stderr


@pytest.mark.parametrize("argv", [["--help"], ["submit", "--help"], ["adjuster", "run", "--help"]])
def test_help_lists_the_exit_statuses(argv: list[str]) -> None:
    out = run_cli(*argv)
    assert "130 interrupted" in " ".join(out.stdout.split())


@pytest.mark.parametrize("command", ["plan", "render", "submit"])
def test_usage_shows_the_entrypoint_after_dashes(command: str) -> None:
    assert "[-- ENTRYPOINT...]" in run_cli(command, "--help").stdout


def test_a_local_dry_run_warns_only_about_flags_not_the_spec_s_fields() -> None:
    from_spec = run_cli("submit", "examples/train-gpu.yaml", "--backend", "local", "--dry-run", "--gpus", "0")
    assert from_spec.returncode == 0, from_spec.stderr
    assert "ignored by the local backend" not in from_spec.stderr
    from_flags = run_cli("submit", "examples/hello.yaml", "--backend", "local", "--dry-run", "--queue", "q", "--priority-class", "p")
    assert "warning: --queue, --priority-class are ignored by the local backend" in from_flags.stderr


KUBECONFIG_TWO_CONTEXTS = (
    "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
    "contexts:\n- {name: a, context: {cluster: c, user: u}}\n- {name: b, context: {cluster: c, user: u, namespace: team-b}}\n"
    "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\n"
)


@pytest.mark.parametrize("command", [["status", "x"], ["list"], ["check"], ["render", "examples/hello.yaml"]], ids=lambda c: c[0])
def test_a_context_that_is_not_there_is_named_as_kubectl_names_it(command: list[str], tmp_path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(KUBECONFIG_TWO_CONTEXTS)
    out = run_cli(*command, "--kubeconfig", str(kubeconfig), "--context", "nosuch")
    assert out.returncode == 2, out.stderr
    assert f"error: no context named 'nosuch' in {kubeconfig} (contexts: a, b)" in out.stderr
    assert "Invalid kube-config" not in out.stderr and "Traceback" not in out.stderr
    without = run_cli(*command, "--context", "foo", env=cli_env())  # no kubeconfig anywhere (HOME has none)
    assert without.returncode == 2, without.stderr
    assert "error: --context foo: no kubeconfig to find it in (" in without.stderr


def test_render_into_another_namespace_says_the_spec_s_queue_belongs_to_its_own() -> None:
    out = run_cli("render", "examples/train-gpu.yaml", "--nodes", "examples/cluster/nodes.json", "-n", "team-b")
    assert out.returncode == 0, out.stderr
    assert ("warning: the spec's queue team-a is a LocalQueue of namespace team-a; -n team-b renders the job into team-b, "
            "where Kueue looks for a LocalQueue team-a (--queue names another)") in out.stderr
    quiet = run_cli("render", "examples/train-gpu.yaml", "--nodes", "examples/cluster/nodes.json", "-n", "team-b", "--queue", "team-b")
    assert "is a LocalQueue of namespace" not in quiet.stderr and "queue-name: team-b" in quiet.stdout


def test_render_says_what_a_rayjob_applied_by_kubectl_alone_does() -> None:
    """The default RayJob is what submit creates (InteractiveMode, the orphan bound): render says that applied alone
    it fails after that bound; a K8sJobMode one without a working dir says the image must hold the code."""
    interactive = run_cli("render", "examples/hello.yaml")
    assert interactive.returncode == 0, interactive.stderr
    assert "applied alone with `kubectl apply`, nothing submits it and it fails after 1800s" in interactive.stderr
    alone = run_cli("render", "examples/hello.yaml", "--submission-mode", "K8sJobMode", "--working-dir", "")
    assert alone.returncode == 0, alone.stderr
    assert "no working dir travels with it: 'python main.py' runs in the image's own working directory" in alone.stderr
    fetched = run_cli("render", "examples/hello.yaml", "--submission-mode", "K8sJobMode", "--working-dir", "s3://bucket/wd.zip")
    assert fetched.returncode == 0 and "no working dir travels" not in fetched.stderr, fetched.stderr
