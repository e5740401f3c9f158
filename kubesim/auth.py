"""Authentication and RBAC authorization for the test API server.

Who a request is: the admin token (`system:masters`, full access, what the
simulated controllers and most tests use), a ServiceAccount token minted by
TokenRequest (`POST .../serviceaccounts/<name>/token`; user
`system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
`system:serviceaccounts:<ns>`, `system:authenticated`; invalid once the
ServiceAccount is deleted or the token expires), or, with no token, the
anonymous user (`system:anonymous`, `system:unauthenticated`). An unknown
token is 401 Unauthorized.

What a request may do: the RBAC authorizer's rules, read from the stored
Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (verbs, apiGroups,
resources with `*`, `resource/subresource`, `*/subresource` and
`resource/*`, resourceNames, nonResourceURLs), over the request attributes
kube-apiserver derives from a URL (list/watch/get/create/update/patch/
delete/deletecollection; subresources such as `pods/log`, `pods/status`,
`rayjobs/status`, `serviceaccounts/token`). A WebSocket port-forward, exec or
attach (a GET) needs `get` on `pods/portforward` (`pods/exec`, `pods/attach`),
as every release's RequestInfo derives it, and `create` as well, as the
handler checks from Kubernetes 1.35 (AuthorizePodWebsocketUpgradeCreatePermission,
pkg/registry/core/pod/rest/subresources.go): a client held to both works on
either side of 1.35. A
denial is 403 with the real message (`pods is forbidden: User "..." cannot
list resource "pods" in API group "" in the namespace "ns"`), and names
bindings whose role is missing (`RBAC: role.rbac.authorization.k8s.io "x"
not found`) as the real authorizer does. The bootstrap ClusterRoles and
bindings that give every authenticated user discovery, `/version`,
`/healthz` and self-review access are created with the server, as is
`cluster-admin`.

What this does not do: no client certificates, OIDC, impersonation,
webhook authorizers or Node authorizer; no aggregated ClusterRoles (`admin`,
`edit`, `view` do not exist); tokens are opaque strings rather than signed
JWTs; RBAC escalation checks (binding a role with more rights than the
binder has) are not made.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .errors import ApiError, qualified

ADMIN_USER = "kubernetes-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    namespace: str | None = None  # of a ServiceAccount
    account: str | None = None

    @property
    def is_admin(self) -> bool:
        return MASTERS in self.groups


ANONYMOUS = Identity("system:anonymous", (UNAUTHENTICATED,))
ADMIN = Identity(ADMIN_USER, (MASTERS, AUTHENTICATED))


@dataclass
class ServiceAccountToken:
    namespace: str
    name: str
    uid: str
    expires: float


@dataclass
class Tokens:
    """Bearer tokens the server accepts."""

    admin_token: str
    minted: dict[str, ServiceAccountToken] = field(default_factory=dict)

    def mint(self, namespace: str, name: str, uid: str, seconds: int) -> tuple[str, float]:
        token = "sa-" + secrets.token_urlsafe(24)
        expires = time.time() + seconds
        self.minted[token] = ServiceAccountToken(namespace, name, uid, expires)
        return token, expires

    def identify(self, header: str | None, account_uid: Callable[[str, str], str | None]) -> Identity:
        """The identity of an Authorization header; ApiError 401 for a token that is not valid."""
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized()
        if token == self.admin_token:
            return ADMIN
        minted = self.minted.get(token)
        if minted is None or minted.expires < time.time() or account_uid(minted.namespace, minted.name) != minted.uid:
            raise unauthorized()
        return service_account_identity(minted.namespace, minted.name)


def service_account_identity(namespace: str, name: str) -> Identity:
    return Identity(f"system:serviceaccount:{namespace}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
                    namespace, name)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


@dataclass(frozen=True)
class Attributes:
    """What kube-apiserver's RequestInfo resolver reads from a request."""

    verb: str
    path: str
    is_resource: bool
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "GET": "get", "HEAD": "get"}


def attributes(method: str, path: str, query: dict[str, list[str]]) -> Attributes:
    """The request attributes of a URL, as RequestInfoFactory derives them."""
    segments = [s for s in path.split("/") if s]
    verb = _VERBS.get(method, method.lower())
    if method == "DELETE":
        verb = "delete"
    if segments[:1] == ["api"]:
        rest, group = segments[2:], ""
        if len(segments) < 3:
            return Attributes(verb, path, False)
    elif segments[:1] == ["apis"]:
        if len(segments) < 4:
            return Attributes(verb, path, False)
        rest, group = segments[3:], segments[1]
    else:
        return Attributes(verb, path, False)
    watch = False
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = ""
    if len(rest) > 1 and rest[0] == "namespaces":
        namespace = rest[1]  # also for the Namespace object itself, as RequestInfo sets it
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD"):
        if watch or (query.get("watch") or [""])[0] in ("1", "true", "True"):
            verb = "watch"
        elif not name:
            verb = "list"
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    return Attributes(verb, path, True, group, resource, subresource, namespace, name)


#: Pod subresources a WebSocket GET upgrades; Kubernetes 1.35 also authorizes such a GET as `create`.
UPGRADED_POD_SUBRESOURCES = ("portforward", "exec", "attach")


def checked_attributes(attrs: Attributes) -> list[Attributes]:
    """Every authorization a request must pass: its own attributes, and for a GET on a pod's portforward, exec
    or attach also `create` (the handler's second check from Kubernetes 1.35)."""
    if attrs.verb == "get" and attrs.resource == "pods" and attrs.subresource in UPGRADED_POD_SUBRESOURCES:
        return [attrs, replace(attrs, verb="create")]
    return [attrs]


# --- RBAC --------------------------------------------------------------------------------


def _has(values: list[str] | None, wanted: str) -> bool:
    values = values or []
    return "*" in values or wanted in values


def _resource_matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    for resource in rule.get("resources") or []:
        if resource == "*" or resource == attrs.full_resource:
            return True
        if attrs.subresource and resource == f"*/{attrs.subresource}":
            return True
        if attrs.subresource and resource == f"{attrs.resource}/*":
            return True
    return False


def _non_resource_matches(rule: dict[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.is_resource:
        return _non_resource_matches(rule, attrs.path)
    if not _has(rule.get("apiGroups"), attrs.api_group) or not _resource_matches(rule, attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: dict[str, Any], identity: Identity, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return identity.account is not None and (namespace, subject.get("name")) == (identity.namespace,
                                                                                        identity.account)
    if kind == "User":
        return subject.get("name") == identity.user
    if kind == "Group":
        return subject.get("name") in identity.groups
    return False


def _describe_subject(identity: Identity) -> str:
    if identity.account is not None:
        return f'ServiceAccount "{identity.account}/{identity.namespace}"'
    return f'User "{identity.user}"'


def authorize(find: Callable[[str, str | None], dict[str, Any] | None],
              find_all: Callable[[str], list[dict[str, Any]]],
              identity: Identity, attrs: Attributes) -> tuple[bool, str]:
    """(allowed, reason) as the RBAC authorizer decides; `find(kind, name, namespace)` reads RBAC objects."""
    if identity.is_admin:
        return True, ""
    problems: list[str] = []

    def check(binding: dict[str, Any], binding_namespace: str, where: str) -> str | None:
        if not any(_subject_matches(s, identity, binding_namespace) for s in binding.get("subjects") or []):
            return None
        ref = binding.get("roleRef") or {}
        role_kind, role_name = ref.get("kind"), ref.get("name", "")
        role = find(role_kind, role_name, binding_namespace if role_kind == "Role" else None)  # type: ignore[arg-type]
        if role is None:
            singular = "role" if role_kind == "Role" else "clusterrole"  # as the RBAC registry names it
            problems.append(f'{qualified(singular, RBAC_GROUP)} "{role_name}" not found')
            return None
        if any(rule_allows(rule, attrs) for rule in role.get("rules") or []):
            return (f'RBAC: allowed by {where} "{binding["metadata"]["name"]}'
                    f'{"/" + binding_namespace if binding_namespace else ""}" of {role_kind} "{role_name}" '
                    f"to {_describe_subject(identity)}")
        return None

    for binding in find_all("ClusterRoleBinding"):
        allowed = check(binding, "", "ClusterRoleBinding")
        if allowed:
            return True, allowed
    if attrs.is_resource and attrs.namespace:
        for binding in find_all("RoleBinding"):
            if binding["metadata"].get("namespace") == attrs.namespace:
                allowed = check(binding, attrs.namespace, "RoleBinding")
                if allowed:
                    return True, allowed
    if not problems:
        return False, ""
    joined = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return False, f"RBAC: {joined}"


def forbidden_message(identity: Identity, attrs: Attributes) -> str:
    if not attrs.is_resource:
        return f'User "{identity.user}" cannot {attrs.verb} path "{attrs.path}"'
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (f'User "{identity.user}" cannot {attrs.verb} resource "{attrs.full_resource}" '
            f'in API group "{attrs.api_group}" {where}')


def forbidden(identity: Identity, attrs: Attributes, reason: str) -> ApiError:
    text = forbidden_message(identity, attrs) + (f": {reason}" if reason else "")
    if not attrs.is_resource:
        return ApiError(403, "Forbidden", f"forbidden: {text}", {})
    resource = qualified(attrs.resource, attrs.api_group)
    prefix = f'{resource} "{attrs.name}"' if attrs.name else resource
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return ApiError(403, "Forbidden", f"{prefix} is forbidden: {text}", details)


def bootstrap_objects() -> list[dict[str, Any]]:
    """The default ClusterRoles/ClusterRoleBindings of a real cluster that tests rely on."""
    version = f"{RBAC_GROUP}/v1"
    labels = {"kubernetes.io/bootstrapping": "rbac-defaults"}
    annotations = {"rbac.authorization.kubernetes.io/autoupdate": "true"}

    def role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": version, "kind": "ClusterRole",
                "metadata": {"name": name, "labels": labels, "annotations": annotations}, "rules": rules}

    def binding(name: str, groups: list[str]) -> dict[str, Any]:
        return {"apiVersion": version, "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": labels, "annotations": annotations},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]}

    return [
        role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                               {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        binding("cluster-admin", [MASTERS]),
        role("system:discovery", [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                       "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
                                   "verbs": ["get"]}]),
        binding("system:discovery", [AUTHENTICATED]),
        role("system:public-info-viewer", [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version",
                                                                "/version/"], "verbs": ["get"]}]),
        binding("system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]),
        role("system:basic-user", [{"apiGroups": ["authorization.k8s.io"],
                                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                                    "verbs": ["create"]},
                                   {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                                    "verbs": ["create"]}]),
        binding("system:basic-user", [AUTHENTICATED]),
    ]
