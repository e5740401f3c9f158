"""The exceptions that carry an exit status to the command line.

Every layer raises these instead of printing: the CLI turns them into one
clear line per problem on stderr and the documented exit status. Library
callers catch them like any other exception.
"""

from __future__ import annotations

#: The exit statuses of every command, documented in the README.
EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3
EXIT_INTERRUPTED = 130


class RaybridgeError(Exception):
    """Base class; `problems` holds one human sentence per thing wrong."""

    exit_code = 1

    def __init__(self, *problems: str) -> None:
        self.problems: list[str] = [p for p in problems if p] or ["unknown error"]
        super().__init__("; ".join(self.problems))


class JobEnded(RaybridgeError):
    """The job was ended by the cluster before it could finish (a run-time limit, a deactivation). Exit status 1."""

    exit_code = 1


class BadInput(RaybridgeError):
    """The user's spec, flags or files are wrong. Exit status 2."""

    exit_code = EXIT_BAD_INPUT


class InfraError(RaybridgeError):
    """The cluster is unreachable, refused us, or did not admit in time. Exit status 3."""

    exit_code = EXIT_INFRA


class ClusterUnreachable(InfraError):
    """No API server answered, or no kubeconfig/in-cluster config works."""

