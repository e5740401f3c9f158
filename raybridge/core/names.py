"""Kubernetes naming rules, the one home for them: DNS labels, label values, object names.

The spec validator, the manifest renderer and the Kueue checks all ask the
same questions ("is this a DNS-1035 label?", "can this be a label value?");
they ask here, so a rule is spelled once and the messages read the same
wherever a bad name is caught.

Every pattern is matched against the whole text (`fullmatch`): with `match`,
`$` also matches before a trailing newline, so `"team-a\n"` would pass.

Pure: regular expressions and messages, no I/O. It does not know which
object a name is for: a kind's length limit is the caller's (KubeRay's in `kuberay/names.py`).
"""

from __future__ import annotations

import re
from typing import Optional

from raybridge.core.consts import K8S_NAME_MAX

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
SUBDOMAIN_MAX = 253

def name_problem(kind: str, name: Optional[str], limit: int = K8S_NAME_MAX) -> Optional[str]:
    """Why `name` cannot name a `kind` object (a DNS-1035 label of at most `limit` characters), or None. The limits of
    the names KubeRay derives others from are KubeRay's (`kuberay/names.py` `name_limit`)."""
    value = name or ""
    if not DNS1035.fullmatch(value):
        return (
            "must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter "
            f"and ending with a letter or digit (got {value!r})"
        )
    if len(value) > limit:
        return f"at most {limit} characters for a {kind} (got {len(value)}: {value!r})"
    return None


def dns_label_problem(value: Optional[str]) -> Optional[str]:
    """Why `value` is not a DNS-1123 label (lower-case letters, digits, '-', at most 63 characters), or None."""
    text = value or ""
    if not DNS1123_LABEL.fullmatch(text) or len(text) > K8S_NAME_MAX:
        return f"must be a DNS-1123 label of at most {K8S_NAME_MAX} characters (got {text!r})"
    return None


def namespace_problem(namespace: Optional[str]) -> Optional[str]:
    """Why `namespace` cannot be a namespace name (a DNS-1123 label), or None."""
    return dns_label_problem(namespace)


def label_value_problem(value: str) -> Optional[str]:
    """Why `value` cannot be a label value, or None."""
    if len(value) > K8S_NAME_MAX or not LABEL_VALUE.fullmatch(value):
        return (
            f"must be a valid label value: at most {K8S_NAME_MAX} letters, digits, '-', '_' or '.', "
            f"starting and ending with a letter or digit (got {value!r})"
        )
    return None


#: A label key's name part (apimachinery validation.IsQualifiedName: at most 63 characters).
QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def label_key_problem(key: str) -> Optional[str]:
    """Why `key` cannot be a label key (an optional DNS-1123 subdomain prefix and '/', then a name of at most 63
    letters, digits, '-', '_' or '.', starting and ending with a letter or digit: apimachinery IsQualifiedName), or None."""
    prefix, slash, name = key.rpartition("/")
    if (slash and (not prefix or subdomain_problem(prefix))) or not QUALIFIED_NAME.fullmatch(name):
        return f"must be a label key: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.' (got {key!r})"
    return None


def queue_name_problem(value: str) -> Optional[str]:
    """Why `value` cannot name a Kueue LocalQueue or WorkloadPriorityClass (or a KAI Queue) in a label, or None.

    Kueue's webhook refuses a `kueue.x-k8s.io/queue-name` label that is not a
    DNS-1123 subdomain (jobframework `ValidateQueueName`); the object it names
    must have such a name anyway, and a label value is at most 63 characters.
    """
    return label_value_problem(value) or (
        f"must name a Kubernetes object: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (got {value!r})"
        if subdomain_problem(value)
        else None
    )


def subdomain_problem(value: str) -> Optional[str]:
    """Why `value` cannot name an object whose names are DNS-1123 subdomains (most kinds), or None."""
    if len(value) > SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending "
            f"with a letter or digit, at most {SUBDOMAIN_MAX} characters (got {value!r})"
        )
    return None


#: A Ray submission id raybridge accepts: it is a URL path segment of the Job API, KubeRay's
#: `spec.jobId`, a log file name and a label value, so it must be safe as all four.
SUBMISSION_ID = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def submission_id_problem(value: str) -> Optional[str]:
    """Why `value` cannot be a Ray submission id, or None."""
    if not SUBMISSION_ID.fullmatch(value):
        return (
            "must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit "
            f"(got {value!r})"
        )
    return None


#: kubernetes@v1.30 staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go (IsEnvVarName):
#: the rule every supported Kubernetes release applies to a container's env var names (later
#: releases may relax it behind RelaxedEnvironmentVariableValidation; the strict rule holds on all).
ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def env_var_name_problem(name: object) -> Optional[str]:
    """Why `name` cannot name an environment variable, or None."""
    if not isinstance(name, str) or not ENV_VAR_NAME.fullmatch(name):
        return (
            "an environment variable name must be letters, digits, '_', '-' or '.', not starting with a digit "
            f"(got {name!r})"
        )
    return None
