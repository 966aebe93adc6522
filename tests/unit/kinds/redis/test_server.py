"""The server's password, directives, restart stamp and exporter: checked as
the CRD checks them, made into the pod as the server reads them, and named
in the status when a pod cannot start on them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from reconciler.actions import CreatePod, EvictPod, PatchChild
from reconciler.kinds.redis import directives, server, service
from reconciler.kinds.redis.identity import FIELDS_HASH_ANNOTATION, TEMPLATE_HASH_ANNOTATION
from reconciler.kinds.redis.identity import owner_of as owner
from reconciler.kinds.redis.pods import pod_fields_hash, pod_manifest, spec_drift, template_hash
from reconciler.kinds.redis.spec import RedisSpec, validate_spec
from reconciler.model import Container, ContainerState
from tests.unit.builders import plan_redis, pod, redis, service_of
from tests.unit.kinds.redis.helpers import status_of

ROOT = Path(__file__).resolve().parents[4]
IMAGE = "redis:5-alpine"
AUTH = {"passwordSecret": {"name": "creds"}}


def spec_of(**fields) -> RedisSpec:
    check = validate_spec({"num": 1, **fields}, IMAGE)
    assert check.errors == ()
    assert check.spec is not None
    return check.spec


def errors(**fields) -> list[str]:
    return [str(e) for e in validate_spec({"num": 1, **fields}, IMAGE).errors]


def container(manifest, name="redis"):
    return next(c for c in manifest["spec"]["containers"] if c["name"] == name)


def test_a_spec_without_these_fields_makes_the_pods_it_made_before():
    """The hashes of a release without this module (pinned in test_pods):
    an upgrade rolls nothing."""
    spec = spec_of(port=6379)
    assert spec.server == server.NONE
    assert template_hash(spec) == "f89818275d"
    made = pod_manifest(redis(num=1), spec, 0)
    assert len(made["spec"]["containers"]) == 1
    assert "env" not in container(made)
    # With no password, protected mode off: spec.networkPolicy says who may connect.
    assert container(made)["args"] == ["--port", "6379", "--protected-mode", "no"]


@pytest.mark.parametrize("hash_", ["f89818275d", "an-older-template"])
def test_a_pod_made_before_protected_mode_was_turned_off_is_not_rolled_for_it(hash_):
    """Made by 0.2.0 without ``--protected-mode no``, under this template's hash
    or an older one: neither the hash nor the container comparison rolls it."""
    spec = spec_of(port=6379)
    before = pod(redis(num=1), 0, hash_=hash_)
    assert before.containers[0].args == ("--port", "6379")
    assert spec_drift(before, spec) is None
    now = dataclasses.replace(
        before,
        containers=(Container("redis", IMAGE, (6379,), ("--port", "6379", *server.OPEN_ARGS)),),
    )
    assert spec_drift(now, spec) is None
    other = dataclasses.replace(
        before, containers=(Container("redis", IMAGE, (6379,), ("--port", "7000")),)
    )
    assert spec_drift(other, spec) == ("spec changed" if hash_ != "f89818275d" else None)


def test_the_password_comes_from_the_secret_and_no_argument_holds_it():
    spec = spec_of(auth={"passwordSecret": {"name": "creds", "key": "pw"}})
    made = pod_manifest(redis(num=1), spec, 0)
    redis_container = container(made)
    assert redis_container["env"] == [
        {"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}}
    ]
    assert redis_container["args"] == ["--port", "6379", "--requirepass", "$(REDIS_PASSWORD)"]
    assert spec.server.password == server.SecretRef("creds", "pw")


def test_the_key_defaults_to_password():
    assert spec_of(auth=AUTH).server.password == server.SecretRef("creds", "password")


@pytest.mark.parametrize(
    ("auth", "says"),
    [
        ({}, "spec.auth.passwordSecret: must be an object with a name, got None"),
        (
            {"passwordSecret": {}},
            "spec.auth.passwordSecret.name: must be a Secret's name, got None",
        ),
        (
            {"passwordSecret": {"name": "s", "key": ""}},
            "spec.auth.passwordSecret.key: must be a key of the Secret, got ''",
        ),
        ("hunter2", "spec.auth.passwordSecret: must be an object with a name, got None"),
    ],
)
def test_a_bad_auth_is_named_by_its_field(auth, says):
    assert errors(auth=auth) == [says]


def test_directives_reach_the_server_as_its_options():
    config = ["maxmemory 100mb", "maxmemory-policy allkeys-lru", 'save ""', "appendonly yes"]
    spec = spec_of(config=config)
    assert container(pod_manifest(redis(num=1), spec, 0))["args"] == [
        "--port",
        "6379",
        "--maxmemory",
        "100mb",
        "--maxmemory-policy",
        "allkeys-lru",
        "--save",
        "",
        "--appendonly",
        "yes",
        *server.OPEN_ARGS,
    ]


@pytest.mark.parametrize(
    ("directive", "field"),
    [
        ("port 7000", "spec.port"),
        ("  PORT 7000", "spec.port"),
        ("requirepass hunter2", "spec.auth.passwordSecret"),
        ("dir /tmp", "spec.storage (its claim is mounted at /data)"),
        ("daemonize yes", "the pod (the server must stay in the foreground)"),
    ],
)
def test_a_directive_we_set_is_refused_naming_the_field_that_sets_it(directive, field):
    name = directive.split()[0].lower()
    assert errors(config=["maxmemory 1mb", directive]) == [
        f"spec.config[1]: directive {name} is set by {field}, not spec.config"
    ]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("maxmemory 1mb", "spec.config: must be a list of directives, got 'maxmemory 1mb'"),
        (
            ["save 'x"],
            'spec.config[0]: directive save: value 1 "\'x" must be printable ASCII without '
            "quotes, '#' or '\\' (\"\" alone is empty)",
        ),
        (["  "], "spec.config[0]: must be a directive and its values, got nothing"),
        ([7], "spec.config[0]: must be a string such as 'maxmemory 100mb', got 7"),
        (["x"] * 101, "spec.config: must have at most 100 directives, got 101"),
    ],
)
def test_bad_directives_are_named(config, says):
    assert errors(config=config) == [says]


def test_a_name_that_starts_like_a_refused_one_is_judged_by_the_allow_list():
    assert errors(config=["portable yes", "maxmemory 1mb"]) == [
        "spec.config[0]: 'portable' is not a directive spec.config allows; see docs/pass.md"
    ]


def crd_config_items() -> dict:
    crd = yaml.safe_load((ROOT / "crds" / "myapp.demo.kubebuilder.io_redis.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["config"]["items"]


def test_the_crd_refuses_the_same_directives_with_the_same_words():
    """Refused at admission (the e2e test applies some), and by the planner
    for objects stored before the rule: the grammar's pattern, and a rule for
    each refused name, all made from `directives`."""
    items = crd_config_items()
    assert items["pattern"] == directives.PATTERN
    rules = [(rule["rule"], rule["message"]) for rule in items["x-kubernetes-validations"]]
    assert rules == [directives.refused_rule(name) for name in directives.REFUSED]


def test_a_new_restart_stamp_rolls_the_pods_and_the_same_one_does_not():
    before = spec_of()
    once = spec_of(restartedAt="2026-11-28T21:00:00Z")
    again = spec_of(restartedAt="2026-11-28T21:00:00Z")
    later = spec_of(restartedAt="2026-11-28T22:00:00Z")
    assert len({template_hash(before), template_hash(once), template_hash(later)}) == 3
    assert template_hash(once) == template_hash(again)
    assert errors(restartedAt=5) == [
        "spec.restartedAt: must be a time such as 2026-01-02T03:04:05Z, got 5"
    ]


def test_the_exporter_reads_the_server_on_loopback_with_the_same_password():
    spec = spec_of(
        port=6380,
        auth=AUTH,
        exporter={"resources": {"limits": {"memory": "64Mi"}}},
    )
    exporter = container(pod_manifest(redis(num=1), spec, 0), "exporter")
    assert exporter["image"] == server.EXPORTER_IMAGE_DEFAULT
    assert exporter["imagePullPolicy"] == "IfNotPresent"  # as the server's, tag or not
    assert exporter["ports"] == [{"name": "metrics", "containerPort": 9121, "protocol": "TCP"}]
    assert exporter["env"] == [
        {"name": "REDIS_ADDR", "value": "redis://localhost:6380"},
        {
            "name": "REDIS_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}},
        },
    ]
    assert exporter["resources"] == {"limits": {"memory": "64Mi"}}
    assert errors(exporter={"resources": {"cpu": "1"}}) == [
        "spec.exporter.resources: must be requests and limits, got {'cpu': '1'}"
    ]


@pytest.mark.parametrize("resources", [[], ["requests"], 5, "64Mi"])
def test_exporter_resources_that_are_no_object_are_refused_naming_the_field(resources):
    assert errors(exporter={"resources": resources}) == [
        f"spec.exporter.resources: must be requests and limits, got {resources!r}"
    ]


def test_the_service_names_the_metrics_port_while_the_pods_have_an_exporter():
    r = redis(num=1, spec={"num": 1, "port": 6379, "exporter": {}})
    found = service_of(r)
    planned = service.plan_service(owner(r), found, 6379, metrics=True)
    (patch,) = planned.actions
    assert isinstance(patch, PatchChild)
    assert [p["name"] for p in patch.body["spec"]["ports"]] == ["redis", "metrics"]
    assert patch.why == "ports follow spec.port and spec.exporter"
    assert service.plan_service(owner(r), found, 6379, metrics=False).actions == ()


def made_for(r, spec, index, **changes):
    """A pod as a pass made it for ``spec``."""
    annotations = {
        TEMPLATE_HASH_ANNOTATION: template_hash(spec),
        FIELDS_HASH_ANNOTATION: pod_fields_hash(spec),
    }
    args = tuple(container(pod_manifest(r, spec, index))["args"])
    found = pod(r, index, **changes)
    return dataclasses.replace(
        found,
        annotations=annotations,
        containers=(Container("redis", IMAGE, (spec.port,), args),),
    )


def test_a_missing_secret_is_named_with_its_key_in_the_status():
    fields = {"num": 1, "port": 6379, "auth": AUTH}
    r = redis(num=1, spec=fields)
    waiting = ContainerState("redis", True, server.CONFIG_ERROR, 'secret "creds" not found')
    stuck = dataclasses.replace(
        made_for(r, spec_of(**fields), 0, ready=False), container_states=(waiting,)
    )
    actions = plan_redis(r, [stuck])
    assert not [a for a in actions if isinstance(a, CreatePod | EvictPod)]
    message = status_of(actions).status["message"]
    assert (
        'r-0 not Ready: CreateContainerConfigError: secret "creds" not found '
        "(spec.auth.passwordSecret: key password of Secret creds)" in message
    )


def test_a_changed_directive_rolls_one_pod_at_a_time_and_a_made_pod_is_left():
    before = {"num": 3, "port": 6379, "config": ["maxmemory 1mb"]}
    after = {**before, "config": ["maxmemory 2mb"]}
    pods = [made_for(redis(num=3, spec=before), spec_of(**before), i) for i in range(3)]
    assert [a for a in plan_redis(redis(num=3, spec=before), pods) if not _status(a)] == []
    rolled = [a for a in plan_redis(redis(num=3, spec=after), pods) if not _status(a)]
    assert [type(a).__name__ for a in rolled] == ["EvictPod"]


def _status(action) -> bool:
    return type(action).__name__ in ("PatchStatus", "PatchChild")


def test_the_crd_defaults_are_the_planners():
    """An object stored before a default existed, or past the schema, gets
    the same value from the planner as from the apiserver."""
    crd = yaml.safe_load((ROOT / "crds" / "myapp.demo.kubebuilder.io_redis.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    fields = spec["properties"]
    secret = fields["auth"]["properties"]["passwordSecret"]["properties"]
    assert secret["key"]["default"] == server.PASSWORD_KEY_DEFAULT
    assert fields["exporter"]["properties"]["image"]["default"] == server.EXPORTER_IMAGE_DEFAULT
    assert fields["config"]["maxItems"] == server.CONFIG_MAX
    assert fields["config"]["items"]["maxLength"] == server.DIRECTIVE_MAX
    assert fields["restartedAt"]["maxLength"] == server.RESTARTED_MAX


@pytest.mark.parametrize("name", ["Not_A_Name", "creds.", "-creds", "CREDS", "creds\n"])
def test_a_secret_name_the_apiserver_would_refuse_is_refused_here_too(name):
    """A pod's secretKeyRef must name a DNS subdomain: any other name would
    fail every pod create, so it is refused with the field named instead."""
    found = errors(auth={"passwordSecret": {"name": name}})
    assert found == [f"spec.auth.passwordSecret.name: must be a Secret's name, got {name!r}"]


@pytest.mark.parametrize("key", ["pass word", "pw/1", "ü", "pw\n"])
def test_a_key_no_secret_can_hold_is_refused(key):
    found = errors(auth={"passwordSecret": {"name": "creds", "key": key}})
    assert found == [f"spec.auth.passwordSecret.key: must be a key of the Secret, got {key!r}"]


def test_names_and_keys_a_secret_can_have_are_taken():
    for ref in ({"name": "creds.team-a", "key": "redis_PW-1.txt"}, {"name": "a"}):
        assert errors(auth={"passwordSecret": ref}) == []


def test_the_crd_holds_the_same_secret_name_and_key_patterns():
    crd = yaml.safe_load((ROOT / "crds/myapp.demo.kubebuilder.io_redis.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    ref = spec["properties"]["auth"]["properties"]["passwordSecret"]["properties"]
    assert ref["name"]["pattern"] == server.SECRET_NAME_PATTERN
    assert ref["key"]["pattern"] == server.SECRET_KEY_PATTERN


def test_a_server_with_none_of_these_fields_adds_nothing_to_a_pod_s_hash():
    """Empty, so that pods made before these fields existed are not rolled."""
    assert server.pod_fields(spec_of().server) == {}


def test_the_secret_and_the_restart_stamp_are_each_recorded():
    assert server.pod_fields(spec_of(auth=AUTH).server) == {"password": ["creds", "password"]}
    stamp = "2026-11-28T21:00:00Z"
    assert server.pod_fields(spec_of(restartedAt=stamp).server) == {server.RESTARTED_FIELD: stamp}


def test_a_secret_s_name_of_253_characters_is_a_name():
    assert errors(auth={"passwordSecret": {"name": "x" * 253}}) == []


LONG = "x" * 254  # a name is at most 253 characters; cut short in the message
CUT = f"'{'x' * 79}... (256 characters)"


@pytest.mark.parametrize(("name", "got"), [("", "''"), (5, "5"), (LONG, CUT)])
def test_a_secret_s_name_that_is_no_name_is_quoted_in_the_error(name, got):
    found = errors(auth={"passwordSecret": {"name": name}})
    assert found == [f"spec.auth.passwordSecret.name: must be a Secret's name, got {got}"]
