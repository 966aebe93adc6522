"""How the server in each pod runs: its password, its redis.conf directives,
the restart stamp, and the optional metrics exporter beside it.

The password is never read by us: the container takes it from the user's
Secret through ``secretKeyRef``, and the server's arguments name only the
variable (``--requirepass $(REDIS_PASSWORD)``, which the kubelet expands),
so it is in no pod spec, Redis object, log or event of ours, and the
reconciler needs no access to Secrets.

Directives are passed as the server's own command-line options
(``--maxmemory 100mb``), which redis-server reads as lines of redis.conf:
no ConfigMap to keep in step, and a change is a change of the pod's
arguments, which rolls the pods one at a time. Only directives of the
grammar in `directives` pass (an allow-list, and words the server and the
kubelet read as written); others are refused, naming the field that sets
them or why.

A Redis that sets none of this makes exactly the pods it made before
(`pod_fields` is empty and no argument is added but `open_args`, which the
template hash leaves out), so an upgrade rolls nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.kinds.redis import directives
from reconciler.kinds.redis.placement import quoted
from reconciler.kinds.redis.quantity import resource

PASSWORD_ENV = "REDIS_PASSWORD"  # the variable both containers read it from
PASSWORD_KEY_DEFAULT = "password"
EXPORTER_CONTAINER = "exporter"
EXPORTER_IMAGE_DEFAULT = "oliver006/redis_exporter:v1.62.0"
EXPORTER_IMAGE_MAX = 255  # spec.image's too
METRICS_PORT_NAME = "metrics"
METRICS_PORT = 9121  # redis_exporter's own default
RESTARTED_FIELD = "restartedAt"
CONFIG_MAX = 100  # directives; the CRD's maxItems
DIRECTIVE_MAX = 1024  # characters; the CRD's maxLength
RESTARTED_MAX = 64
# Waiting reason of a container whose Secret or key is missing.
CONFIG_ERROR = "CreateContainerConfigError"


@dataclass(frozen=True)
class SecretRef:
    name: str
    key: str = PASSWORD_KEY_DEFAULT

    def __str__(self) -> str:
        return f"key {self.key} of Secret {self.name}"


@dataclass(frozen=True)
class Exporter:
    image: str = EXPORTER_IMAGE_DEFAULT
    resources: str = "{}"  # canonical JSON: hashable, like placement's fields


@dataclass(frozen=True)
class Server:
    """The fields of this module, checked; hashable, to key the pods' caches."""

    password: SecretRef | None = None
    config: tuple[tuple[str, ...], ...] = ()  # each directive, split into words
    restarted_at: str | None = None
    exporter: Exporter | None = None


NONE = Server()


def _directive_error(directive: Any) -> str | None:
    if not isinstance(directive, str):
        return f"must be a string such as 'maxmemory 100mb', got {quoted(directive)}"
    if len(directive) > DIRECTIVE_MAX:
        return f"must be at most {DIRECTIVE_MAX} characters, got {len(directive)}"
    return directives.error(directive)


def _config_errors(found: Any) -> list[tuple[str, str]]:
    if found is None:
        return []
    if not isinstance(found, list):
        return [("spec.config", f"must be a list of directives, got {quoted(found)}")]
    if len(found) > CONFIG_MAX:
        return [("spec.config", f"must have at most {CONFIG_MAX} directives, got {len(found)}")]
    errors = ((f"spec.config[{i}]", _directive_error(d)) for i, d in enumerate(found))
    return [(path, e) for path, e in errors if e is not None]


# What the apiserver takes in a pod's secretKeyRef (a Secret's name is a DNS
# subdomain; a key is a ConfigMap key's form), so that a name that would fail
# every pod create is refused with its field named. The CRD's patterns, held
# equal by a unit test. Both at most 253 characters, checked first.
SECRET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
_SECRET_NAME = re.compile(SECRET_NAME_PATTERN)
_SECRET_KEY = re.compile(SECRET_KEY_PATTERN)


def _name_ok(value: Any, form: re.Pattern[str]) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 253 and form.fullmatch(value) is not None


def _auth_errors(found: Any) -> list[tuple[str, str]]:
    if found is None:
        return []
    path = "spec.auth.passwordSecret"
    ref = found.get("passwordSecret") if isinstance(found, Mapping) else None
    if not isinstance(ref, Mapping):
        return [(path, f"must be an object with a name, got {quoted(ref)}")]
    errors = []
    if not _name_ok(ref.get("name"), _SECRET_NAME):
        errors.append((f"{path}.name", f"must be a Secret's name, got {quoted(ref.get('name'))}"))
    key = ref.get("key", PASSWORD_KEY_DEFAULT)
    if not _name_ok(key, _SECRET_KEY):
        errors.append((f"{path}.key", f"must be a key of the Secret, got {quoted(key)}"))
    return errors


RESOURCES_MAX = 16  # names in requests or limits; the CRD's maxProperties


def _resources_ok(found: Any) -> bool:
    """Requests and limits of quantities a pod takes: the CRD's pattern, and
    not below zero (the apiserver refuses such a pod)."""
    if not isinstance(found, Mapping) or set(found) - {"requests", "limits"}:
        return False
    return all(
        isinstance(v, Mapping) and len(v) <= RESOURCES_MAX and all(resource(q) for q in v.values())
        for v in found.values()
    )


def _exporter_errors(found: Any, image_ok: Callable[[str], bool]) -> list[tuple[str, str]]:
    if found is None:
        return []
    if not isinstance(found, Mapping):
        return [("spec.exporter", f"must be an object, got {quoted(found)}")]
    errors = []
    image = found.get("image", EXPORTER_IMAGE_DEFAULT)
    if not isinstance(image, str) or len(image) > EXPORTER_IMAGE_MAX or not image_ok(image):
        errors.append(("spec.exporter.image", f"must be an image reference, got {quoted(image)}"))
    resources = found.get("resources", {})
    if not _resources_ok(resources):
        errors.append(
            ("spec.exporter.resources", f"must be requests and limits, got {quoted(resources)}")
        )
    return errors


def _restarted_errors(found: Any) -> list[tuple[str, str]]:
    if found is None or (isinstance(found, str) and len(found) <= RESTARTED_MAX):
        return []
    path = f"spec.{RESTARTED_FIELD}"
    return [(path, f"must be a time such as 2026-01-02T03:04:05Z, got {quoted(found)}")]


def field_errors(spec: Mapping[str, Any], image_ok: Callable[[str], bool]) -> list[tuple[str, str]]:
    """Each field of this module as the CRD checks it: an object stored past
    its schema still gets a message naming the field. ``image_ok`` is
    spec.image's check, which the exporter's image passes too."""
    return [
        *_auth_errors(spec.get("auth")),
        *_config_errors(spec.get("config")),
        *_restarted_errors(spec.get(RESTARTED_FIELD)),
        *_exporter_errors(spec.get("exporter"), image_ok),
    ]


def server_of(spec: Mapping[str, Any]) -> Server:
    """The fields of a spec that `field_errors` passed."""
    if not any(spec.get(k) is not None for k in ("auth", "config", RESTARTED_FIELD, "exporter")):
        return NONE
    auth = spec.get("auth")
    password = None
    if isinstance(auth, Mapping):
        ref = auth["passwordSecret"]
        password = SecretRef(ref["name"], ref.get("key", PASSWORD_KEY_DEFAULT))
    config = tuple(tuple(directives.split(d)) for d in spec.get("config") or ())
    exporter = spec.get("exporter")
    return Server(
        password,
        config,
        spec.get(RESTARTED_FIELD),
        None if exporter is None else _exporter_of(exporter),
    )


def _exporter_of(found: Mapping[str, Any]) -> Exporter:
    resources = json.dumps(found.get("resources", {}), sort_keys=True)
    return Exporter(found.get("image", EXPORTER_IMAGE_DEFAULT), resources)


def args(server: Server) -> tuple[str, ...]:
    """The server's options after ``--port``: each directive as
    ``--name value...``, then the password by its variable's name."""
    found: list[str] = []
    for words in server.config:
        found += directives.arguments(words)
    if server.password is not None:
        found += ["--requirepass", f"$({PASSWORD_ENV})"]
    return tuple(found)


# A server with no password answers only loopback clients while its protected
# mode is on, as Debian's build and redis.conf's default have it (the official
# image's build has it off): without spec.auth, spec.networkPolicy says who may
# connect. Outside the template hash, so pods made before are not rolled.
OPEN_ARGS = ("--protected-mode", "no")


def open_args(server: Server) -> tuple[str, ...]:
    """The arguments after `args` that let a server without a password serve
    clients other than loopback."""
    return () if server.password is not None else OPEN_ARGS


def _password_env(ref: SecretRef) -> dict[str, Any]:
    return {
        "name": PASSWORD_ENV,
        "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
    }


def env(server: Server) -> list[dict[str, Any]]:
    """The server container's environment: the password, when it has one."""
    return [] if server.password is None else [_password_env(server.password)]


def exporter_container(server: Server, port: int) -> dict[str, Any] | None:
    """The exporter beside the server: it reads the server on loopback, with
    the same password, and serves ``/metrics`` on the ``metrics`` port."""
    exporter = server.exporter
    if exporter is None:
        return None
    variables: list[dict[str, Any]] = [{"name": "REDIS_ADDR", "value": f"redis://localhost:{port}"}]
    if server.password is not None:
        variables.append(_password_env(server.password))
    container: dict[str, Any] = {
        "name": EXPORTER_CONTAINER,
        "image": exporter.image,
        "imagePullPolicy": "IfNotPresent",
        "env": variables,
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
    }
    resources = json.loads(exporter.resources)
    if resources:
        container["resources"] = resources
    return container


def pod_fields(server: Server) -> dict[str, Any]:
    """What this module makes of a pod besides the server's arguments (which
    its container carries), for the hash a pod is made with: empty when
    nothing is set, so that earlier pods are not rolled."""
    fields: dict[str, Any] = {}
    if server.password is not None:
        fields["password"] = [server.password.name, server.password.key]
    if server.restarted_at is not None:
        fields[RESTARTED_FIELD] = server.restarted_at
    if server.exporter is not None:
        fields["exporter"] = [server.exporter.image, server.exporter.resources]
    return fields


def waiting_hints(server: Server) -> Mapping[str, str]:
    """What to add to a container's waiting reason to name its cause: a
    Secret or key that is missing leaves the container waiting on its
    configuration, and the kubelet's message names only one of the two."""
    if server.password is None:
        return {}
    return {CONFIG_ERROR: f"spec.auth.passwordSecret: {server.password}"}
