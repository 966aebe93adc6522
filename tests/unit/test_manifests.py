"""The shipped artefacts (config/*.yaml, systemd/, Dockerfile) agree with the
code and with each other, checked without a cluster: a drift here (a verb the
code starts using, a renamed flag, a uid that differs between the image and
the pod) fails before anyone deploys it. tests/e2e/test_ship.py runs them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from reconciler import __version__
from reconciler.checks.access import needed
from reconciler.cli import cli
from reconciler.config import Config
from reconciler.constants import LABEL_VERSION

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
SYSTEMD = ROOT / "systemd"
DOCKERFILE = ROOT / "Dockerfile"
INSTALL_PREFIX = "/opt/reconciler"
UID = 65532
# Measured with systemd 252 (`systemd-analyze security --offline=yes`); what
# remains is network access, which a reconciler needs. docs/install.md.
EXPOSURE_MAX = 1.1

# What the code asks of the apiserver (derived from the kinds by
# reconciler/checks/needs.py; `reconciler check` asks for it too), as the
# manifests' rules are read.
RULES = {key: set(verbs) for key, verbs in needed().plain.items()}
NAMED_RULES = {key: (set(v), set(n)) for key, (v, n) in needed().named.items()}


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((CONFIG / name).read_text()) if d]


def one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs(name) if d["kind"] == kind]
    return found


def pod_spec(name: str) -> dict[str, Any]:
    """The pod template's spec of a CronJob or a Deployment."""
    obj = docs(name)[0]
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


# ------------------------------------------------------------------ parsers


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """Instructions per stage as (INSTRUCTION, arguments), continuations joined."""
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        if not buf and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        lines.append(buf + raw)
        buf = ""
    # Instructions before the first FROM (the global ARGs) belong to no stage.
    preamble: list[tuple[str, str]] = []
    stages: list[list[tuple[str, str]]] = []
    for line in lines:
        instr, _, args = line.strip().partition(" ")
        if instr.upper() == "FROM":
            stages.append([])
        (stages[-1] if stages else preamble).append((instr.upper(), " ".join(args.split())))
    return stages


def dockerfile_args(text: str) -> dict[str, str]:
    """The global ARGs (before the first FROM) and their defaults."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        instr, _, args = raw.strip().partition(" ")
        if instr.upper() == "FROM":
            break
        if instr.upper() == "ARG":
            key, _, value = args.strip().partition("=")
            found[key] = value
    return found


def docker_env(stage: list[tuple[str, str]]) -> dict[str, str]:
    """ENV key=value pairs of one stage (the only ENV form the Dockerfile uses)."""
    env: dict[str, str] = {}
    for instr, args in stage:
        if instr == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """A systemd unit as section -> [(key, value)]; keys may repeat."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    buf = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line, buf = buf + line, ""
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = []
        else:
            key, _, value = line.partition("=")
            sections[current].append((key.strip(), " ".join(value.split())))
    return sections


def values(u: dict[str, list[tuple[str, str]]], section: str, key: str) -> list[str]:
    return [v for k, v in u.get(section, []) if k == key]


def value(u: dict[str, list[tuple[str, str]]], section: str, key: str) -> str:
    found = values(u, section, key)
    assert len(found) == 1, f"[{section}] {key}: {found}"
    return found[0]


def tool(name: str, installer: str = "bash hack/deps.sh") -> str:
    """A tool from the venv (pip) or the system (apt); hack/deps.sh installs both.

    `make test-unit` needs no apt-get, so there a missing system tool skips the
    test that needs it; `make test` installs the tools and sets
    REQUIRE_SYSTEM_TOOLS=1, so there a missing tool fails.
    """
    here = Path(sys.executable).parent / name
    path = str(here) if here.exists() else shutil.which(name)
    if not path and not os.environ.get("REQUIRE_SYSTEM_TOOLS"):
        pytest.skip(f"{name} not found; `{installer}` installs it")
    assert path, f"{name} not found; run `{installer}`"
    return path


# --------------------------------------------------------------------- RBAC


def printed(*args: str) -> list[dict[str, Any]]:
    """What `reconciler manifests ARGS` prints, as objects."""
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["manifests", *args])
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.output) if d]


SHIPPED_SA = "reconciler-system:reconciler"


def test_config_rbac_is_what_manifests_prints_for_the_shipped_service_account():
    """One source (checks/needs.py, from the kinds): the shipped ClusterRole and its
    binding are what the binary prints, and what `check` asks for."""
    shipped = [d for d in docs("rbac/rbac.yaml") if d["kind"].startswith("ClusterRole")]
    assert shipped == printed("rbac", "--serviceaccount", SHIPPED_SA)


def test_the_cluster_role_grants_exactly_what_the_code_uses():
    role = one("rbac/rbac.yaml", "ClusterRole")
    granted: dict[tuple[str, str], set[str]] = {}
    named: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for rule in role["rules"]:
        assert set(rule) - {"resourceNames"} == {"apiGroups", "resources", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (group, resource)
                assert key not in granted and key not in named, f"{key} granted twice"
                if "resourceNames" in rule:
                    named[key] = (set(rule["verbs"]), set(rule["resourceNames"]))
                else:
                    granted[key] = set(rule["verbs"])
    assert granted == RULES
    assert named == NAMED_RULES
    flat = json.dumps(role["rules"])
    assert "*" not in flat and "watch" not in flat


def test_the_leader_election_role_is_what_manifests_prints():
    shipped = docs("leader-election/role.yaml")
    sa = one("rbac/rbac.yaml", "ServiceAccount")["metadata"]
    assert shipped == printed("leases", "-n", sa["namespace"], "--serviceaccount", SHIPPED_SA)


def test_the_sharded_overlays_role_is_what_manifests_prints_with_shard():
    from .test_network_manifests import kustomize

    rendered = kustomize(CONFIG / "daemon-sharded")
    (role,) = [o for (kind, _), o in rendered.items() if kind == "Role"]
    want = printed("leases", "-n", "reconciler-system", "--serviceaccount", SHIPPED_SA, "--shard")
    assert role["rules"] == want[0]["rules"]


def test_the_charts_cluster_role_is_what_manifests_prints():
    from .test_chart_render import render

    (role,) = [o for (kind, _), o in render().items() if kind == "ClusterRole"]
    assert role["rules"] == printed("rbac", "--user", "u")[0]["rules"]


def test_rbac_binds_the_service_account_in_its_namespace():
    namespace = one("rbac/rbac.yaml", "Namespace")
    sa = one("rbac/rbac.yaml", "ServiceAccount")
    binding = one("rbac/rbac.yaml", "ClusterRoleBinding")
    assert namespace["metadata"]["name"] == sa["metadata"]["namespace"] == "reconciler-system"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "reconciler",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "reconciler", "namespace": "reconciler-system"}
    ]
    for obj in docs("rbac/rbac.yaml"):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "reconciler"
        assert labels["app.kubernetes.io/part-of"] == "reconciler"


# ---------------------------------------------------------------- workloads


@pytest.mark.parametrize(
    ("name", "command"), [("cronjob/cronjob.yaml", "sync"), ("daemon/deployment.yaml", "run")]
)
def test_workload_runs_restricted_as_the_image_user(name: str, command: str):
    spec = pod_spec(name)
    assert docs(name)[0]["metadata"]["namespace"] == "reconciler-system"
    assert spec["serviceAccountName"] == one("rbac/rbac.yaml", "ServiceAccount")["metadata"]["name"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == UID
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == f"reconciler:{__version__}"
    assert container["args"][0] == command  # the image's ENTRYPOINT is `reconciler`
    assert "command" not in container
    ctx = container["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["runAsUser"] == UID and ctx["runAsNonRoot"] is True
    assert {"requests", "limits"} <= set(container["resources"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RECONCILER_LOG_FORMAT"] == "json"
    # Read-only root: /tmp is the only writable place, and it is an emptyDir.
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in volume
    # No kubeconfig anywhere: the mounted service account token is used.
    assert "KUBECONFIG" not in env and spec.get("automountServiceAccountToken", True)


def test_cronjob_passes_never_overlap_and_end_before_the_next():
    cron = docs("cronjob/cronjob.yaml")[0]["spec"]
    assert cron["schedule"] == "*/5 * * * *"
    assert cron["concurrencyPolicy"] == "Forbid"
    period = 5 * 60
    assert 0 < cron["startingDeadlineSeconds"] < period
    job = cron["jobTemplate"]["spec"]
    assert 0 < job["activeDeadlineSeconds"] < period
    assert 0 <= job["backoffLimit"] <= 2
    assert job["ttlSecondsAfterFinished"] > 0
    assert job["template"]["spec"]["restartPolicy"] == "Never"


def test_deployment_replicas_elect_a_leader_and_are_probed():
    deploy = docs("daemon/deployment.yaml")[0]["spec"]
    assert deploy["replicas"] == 2
    labels = deploy["template"]["metadata"]["labels"]
    assert deploy["selector"]["matchLabels"].items() <= labels.items()
    (container,) = deploy["template"]["spec"]["containers"]
    assert container["args"] == ["run", "--leader-elect", "--metrics-address", ":8080"]
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("metrics", 8080)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    env = {e["name"]: e for e in container["env"]}
    lease_ns = env["RECONCILER_LEADER_ELECTION_NAMESPACE"]["valueFrom"]["fieldRef"]
    assert lease_ns == {"fieldPath": "metadata.namespace"}
    # The args parse with the real CLI (a typo would crash-loop the pod).
    from click.testing import CliRunner

    from reconciler.cli import cli

    result = CliRunner().invoke(cli, [*container["args"], "--help"])
    assert result.exit_code == 0, result.output


def pod_specs(obj: Any) -> list[dict[str, Any]]:
    """Every pod spec in a rendered object, at any depth: a Deployment's, a
    CronJob's, and whatever workload comes next."""
    if isinstance(obj, list):
        return [spec for item in obj for spec in pod_specs(item)]
    if not isinstance(obj, dict):
        return []
    if "containers" in obj:
        return [obj]
    return [spec for value in obj.values() for spec in pod_specs(value)]


# The chart's modes, as `helm template` values.
CHART_MODES = {
    "daemon": (),
    "daemon without leader election": (
        "--set",
        "leaderElection.enable=false",
        "--set",
        "replicas=1",
    ),
    "daemon sharded": ("--set", "shard.enable=true", "--set", "replicas=3"),
    "cronjob": ("--set", "mode=cronjob"),
}
# The overlays that run our pods; every overlay is checked.
WORKLOAD_OVERLAYS = {"daemon", "daemon-sharded", "cronjob"}


def assert_no_service_links(specs: list[dict[str, Any]]) -> None:
    """A kubelet gives a pod RECONCILER_METRICS_PORT=tcp://... and the like
    for each Service of its namespace; enableServiceLinks: false leaves them
    out (the settings ignore them too: tests/unit/cli/test_service_links.py)."""
    for spec in specs:
        assert spec.get("enableServiceLinks") is False, spec["containers"][0]["name"]


@pytest.mark.parametrize(
    "overlay", sorted(p.parent.name for p in CONFIG.glob("*/kustomization.yaml"))
)
def test_no_overlays_pod_gets_the_namespaces_service_links(overlay: str):
    from .test_network_manifests import kustomize

    specs = pod_specs(list(kustomize(CONFIG / overlay).values()))
    assert bool(specs) == (overlay in WORKLOAD_OVERLAYS)
    assert_no_service_links(specs)


@pytest.mark.parametrize("mode", CHART_MODES)
def test_no_charts_pod_gets_the_namespaces_service_links(mode: str):
    from .test_chart_render import render

    specs = pod_specs(list(render(*CHART_MODES[mode]).values()))
    assert specs
    assert_no_service_links(specs)


def shipped_allowed_images() -> str:
    """config/reconciler.yaml's allowed_images, as a variable carries it."""
    return ",".join(yaml.safe_load((CONFIG / "reconciler.yaml").read_text())["allowed_images"])


def assert_allowed_images(specs: list[dict[str, Any]]) -> None:
    for spec in specs:
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        assert env["RECONCILER_ALLOWED_IMAGES"] == shipped_allowed_images()


@pytest.mark.parametrize("overlay", sorted(WORKLOAD_OVERLAYS))
def test_each_overlay_allows_the_images_the_shipped_config_allows(overlay: str):
    from .test_network_manifests import kustomize

    assert_allowed_images(pod_specs(list(kustomize(CONFIG / overlay).values())))


@pytest.mark.parametrize("mode", CHART_MODES)
def test_each_chart_mode_allows_the_images_the_shipped_config_allows(mode: str):
    from .test_chart_render import render

    assert_allowed_images(pod_specs(list(render(*CHART_MODES[mode]).values())))


def test_leader_election_role_is_namespaced_and_minimal():
    role = one("leader-election/role.yaml", "Role")
    binding = one("leader-election/role.yaml", "RoleBinding")
    sa = one("rbac/rbac.yaml", "ServiceAccount")["metadata"]
    assert role["metadata"]["namespace"] == sa["namespace"]
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    ]


# ---------------------------------------------------- priority and fairness

FLOWCONTROL = "flowcontrol/flowcontrol.yaml"


def test_flow_schemas_classify_the_service_account_of_config_rbac():
    sa = one("rbac/rbac.yaml", "ServiceAccount")["metadata"]
    objs = docs(FLOWCONTROL)
    levels = {
        d["metadata"]["name"]: d["spec"] for d in objs if d["kind"] == "PriorityLevelConfiguration"
    }
    schemas = {d["metadata"]["name"]: d["spec"] for d in objs if d["kind"] == "FlowSchema"}
    assert set(schemas) == set(levels) == {"reconciler", "reconciler-leases"}
    for name, spec in schemas.items():
        assert spec["priorityLevelConfiguration"] == {"name": name}
        (rule,) = spec["rules"]
        assert rule["subjects"] == [
            {
                "kind": "ServiceAccount",
                "serviceAccount": {"name": sa["name"], "namespace": sa["namespace"]},
            }
        ]
        # Before the default service-accounts FlowSchema (9000, workload-low) and
        # after the built-in ones for system components and kube-system (up to 900).
        assert 900 < spec["matchingPrecedence"] < 9000
    leases, rest = schemas["reconciler-leases"], schemas["reconciler"]
    assert leases["matchingPrecedence"] < rest["matchingPrecedence"]
    (lease_rule,) = leases["rules"][0]["resourceRules"]
    assert (lease_rule["apiGroups"], lease_rule["resources"]) == (
        ["coordination.k8s.io"],
        ["leases"],
    )
    # Every verb the Lease Roles grant: leader election's, and sharding's.
    sharded = yaml.safe_load((CONFIG / "daemon-sharded" / "kustomization.yaml").read_text())
    (patch,) = [p for p in sharded["patches"] if p["target"]["kind"] == "Role"]
    (op,) = yaml.safe_load(patch["patch"])
    granted = set(one("leader-election/role.yaml", "Role")["rules"][0]["verbs"]) | set(op["value"])
    assert set(lease_rule["verbs"]) == granted
    (everything,) = rest["rules"][0]["resourceRules"]
    assert everything["verbs"] == everything["resources"] == everything["apiGroups"] == ["*"]
    # The Lease level lends none of its seats; both queue a burst instead of a 429.
    assert levels["reconciler-leases"]["limited"]["lendablePercent"] == 0
    for spec in levels.values():
        assert spec["type"] == "Limited"
        assert spec["limited"]["limitResponse"]["type"] == "Queue"
        assert 0 < spec["limited"]["nominalConcurrencyShares"] < 100  # workload-low has 100
    kustomization = yaml.safe_load((CONFIG / "flowcontrol" / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["flowcontrol.yaml"]


# --------------------------------------------------------------- Dockerfile


def test_dockerfile_builds_a_venv_and_runs_it_as_the_pod_user():
    builder, final = dockerfile_stages(DOCKERFILE.read_text())
    # One base for both stages, python:3.11-slim unless --build-arg BASE=...
    # (the image tests build on a stand-in made from Debian's packages).
    assert dockerfile_args(DOCKERFILE.read_text()) == {"BASE": "python:3.11-slim"}
    assert builder[0] == ("FROM", "${BASE} AS builder")
    assert final[0] == ("FROM", "${BASE}")
    runs = [a for i, a in builder if i == "RUN"]
    assert f"python -m venv {INSTALL_PREFIX}" in runs
    assert any(re.fullmatch(rf"{INSTALL_PREFIX}/bin/pip install .*\.", r) for r in runs)
    assert ("COPY", f"--from=builder {INSTALL_PREFIX} {INSTALL_PREFIX}") in final
    # Besides the venv, only bytecode: compiled as root, before the pod's user,
    # with writing allowed for that one command (the ENV forbids it after).
    (warm,) = [a for i, a in final if i == "RUN"]
    assert warm.startswith("env -u PYTHONDONTWRITEBYTECODE python -c ")
    assert {"reconciler.cli", "reconciler.run.daemon"} <= set(re.findall(r"[\w.]+", warm))
    assert [i for i, _ in final].index("RUN") < [i for i, _ in final].index("USER")
    env = docker_env(final)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    assert env["PATH"].startswith(f"{INSTALL_PREFIX}/bin:")
    (user,) = [a for i, a in final if i == "USER"]
    assert user == f"{UID}:{UID}"
    assert ("ENTRYPOINT", '["reconciler"]') in final and ("CMD", '["sync"]') in final


def _dockerignore_regex(pattern: str) -> re.Pattern[str]:
    """Docker's syntax: ** spans directories (also none), * and ? stay within one."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignored(path: str, patterns: list[str]) -> bool:
    """The last matching pattern wins; a pattern matching a parent directory counts."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _dockerignore_regex(pattern.lstrip("!").strip("/"))
        if any(regex.fullmatch(p) for p in prefixes):
            excluded = not negate
    return excluded


def test_dockerignore_sends_only_what_the_build_copies():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    builder = dockerfile_stages(DOCKERFILE.read_text())[0]
    sources = [s for i, a in builder if i == "COPY" for s in a.split()[:-1]]
    assert sources, "the builder copies nothing"
    for src in sources:
        assert not dockerignored(src, patterns), f"{src} is copied but .dockerignore drops it"
    assert not dockerignored("reconciler/cli/commands.py", patterns)
    for heavy in (".venv/bin/python", ".git/HEAD", ".cluster/kubeconfig", "tests/__init__.py"):
        assert dockerignored(heavy, patterns), heavy
    assert dockerignored("reconciler/__pycache__/cli.cpython-311.pyc", patterns)


def test_hadolint_passes_and_would_catch_a_bad_dockerfile(tmp_path: Path):
    hadolint = tool("hadolint")
    ok = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    caught = subprocess.run([hadolint, str(bad)], capture_output=True, text=True)
    assert caught.returncode != 0 and "DL3007" in caught.stdout


# ------------------------------------------------------------------ systemd

UNITS = (
    "reconciler.service",
    "reconciler-sync.service",
    "reconciler-sync.timer",
    "reconciler@.service",
)
# Drop-ins, for some configs (systemd/reconciler-fleet.conf: test_systemd_units.py).
DROP_INS = ("reconciler-fleet.conf",)
# What an instance of the template has of its own (%i: the context, escaped).
PER_INSTANCE = {
    "StateDirectory": "reconciler/%i",
    "Environment": "HOME=%S/reconciler/%i",
    "EnvironmentFile": "-/etc/reconciler/%i.env",
    "SyslogIdentifier": "reconciler@%i",
}
HARDENING = {
    "DynamicUser": "yes",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "CapabilityBoundingSet": "",
    "LoadCredential": "kubeconfig:/etc/reconciler/kubeconfig",
    "EnvironmentFile": "-/etc/reconciler/reconciler.env",
    "StateDirectory": "reconciler",
    # Without it, a DynamicUser with no passwd entry crashes on `~` (found
    # by booting the units under systemd 252 in systemd-nspawn).
    "Environment": "HOME=%S/reconciler",
}


def exec_start(u: dict[str, list[tuple[str, str]]]) -> list[str]:
    argv = shlex.split(value(u, "Service", "ExecStart"))
    assert argv[0] == f"{INSTALL_PREFIX}/bin/reconciler"
    return argv


def parse_cli(argv: list[str]) -> click.Context:
    """Parse like `reconciler ARGS` does, without running: an unknown flag fails."""
    args = [
        a.replace("${CREDENTIALS_DIRECTORY}", "/run/credentials/x")
        .replace("${STATE_DIRECTORY}", "/var/lib/reconciler")
        .replace("%I", "prod")
        for a in argv[1:]
    ]
    i = next(i for i, a in enumerate(args) if a in cli.commands)
    parent = cli.make_context("reconciler", args[: i + 1])
    command = cli.commands[args[i]]
    return command.make_context(args[i], args[i + 1 :], parent=parent)


def test_daemon_unit_notifies_and_is_watched():
    u = unit(SYSTEMD / "reconciler.service")
    assert value(u, "Service", "Type") == "notify"
    assert value(u, "Service", "Restart") == "on-failure"
    assert value(u, "Service", "RestartPreventExitStatus") == "2"  # bad config: do not loop
    cfg = Config()
    watchdog = float(value(u, "Service", "WatchdogSec"))
    # WATCHDOG=1 follows each pass: allow two intervals and one slow pass.
    assert watchdog >= 2 * (cfg.interval + cfg.jitter) + cfg.timeout * (cfg.max_retries + 1)
    argv = exec_start(u)
    assert parse_cli(argv).info_name == "run"
    # The kubeconfig as kubectl's default, so a `clusters` entry's own wins.
    assert "--kubeconfig" not in argv
    assert "KUBECONFIG=%d/kubeconfig" in values(u, "Service", "Environment")
    assert argv[argv.index("--config") + 1] == "/etc/reconciler/reconciler.yaml"
    assert argv[argv.index("--state-file") + 1].startswith("${STATE_DIRECTORY}/")


@pytest.mark.parametrize("name", ["reconciler.service", "reconciler-sync.service"])
def test_service_units_are_sandboxed(name: str):
    u = unit(SYSTEMD / name)
    for key, want in HARDENING.items():
        found = values(u, "Service", key)
        assert want in found if key == "Environment" else found == [want], key
    assert values(u, "Service", "SystemCallFilter")[0] == "@system-service"


def test_the_template_is_the_daemon_unit_for_the_context_named_by_its_instance():
    """reconciler@prod.service: reconciler.service with `--context prod`, a
    state directory, a variables file and a log name of its own."""
    daemon, template = unit(SYSTEMD / "reconciler.service"), unit(SYSTEMD / "reconciler@.service")
    argv = exec_start(template)
    assert argv[argv.index("--context") + 1] == "%I"
    context = parse_cli(argv)
    assert context.info_name == "run" and context.params["contexts"] == ("prod",)
    assert [a for a in argv if a not in ("--context", "%I")] == exec_start(daemon)
    assert values(template, "Service", "EnvironmentFile") == [
        "-/etc/reconciler/reconciler.env",
        PER_INSTANCE["EnvironmentFile"],
    ]
    for key, want in PER_INSTANCE.items():
        if key == "Environment":
            assert want in values(template, "Service", key)
        elif key != "EnvironmentFile":
            assert value(template, "Service", key) == want, key
    assert (
        values(template, "Service", "Environment")[1:]
        == values(daemon, "Service", "Environment")[1:]
    )
    same = {k: v for k, v in daemon["Service"] if k not in PER_INSTANCE and k != "ExecStart"}
    assert same == {k: v for k, v in template["Service"] if k in same}


def test_sync_unit_is_a_oneshot_started_by_the_timer():
    u = unit(SYSTEMD / "reconciler-sync.service")
    assert value(u, "Service", "Type") == "oneshot"
    assert parse_cli(exec_start(u)).info_name == "sync"
    assert "WatchdogSec" not in dict(u["Service"])
    timer = unit(SYSTEMD / "reconciler-sync.timer")
    assert value(timer, "Timer", "OnCalendar") == "*:0/5"
    assert value(timer, "Timer", "Persistent") == "true"
    assert value(timer, "Install", "WantedBy") == "timers.target"
    # Passes of the timer end before the next is due.
    assert int(value(u, "Service", "TimeoutStartSec")) < 5 * 60


def _verify(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("systemd-analyze"), "verify", *(str(directory / n) for n in UNITS)],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=60,
    )


def _copy_units(directory: Path, binary: str) -> None:
    """The units with ExecStart pointing at a real binary; nothing else changes."""
    for name in UNITS:
        text = (SYSTEMD / name).read_text()
        (directory / name).write_text(text.replace(f"{INSTALL_PREFIX}/bin/reconciler", binary))


def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path):
    # verify checks that ExecStart exists; /opt/reconciler is the bastion's path.
    _copy_units(tmp_path, tool("reconciler"))
    ok = _verify(tmp_path)
    # verify exits 0 on unknown keys and bad values: its output must be empty too.
    assert ok.returncode == 0 and not (ok.stdout + ok.stderr).strip(), ok.stdout + ok.stderr
    broken = tmp_path / "reconciler.service"
    broken.write_text(broken.read_text().replace("Type=notify", "Type=notifyy"))
    assert "notifyy" in _verify(tmp_path).stderr


def exposure(path: Path) -> float:
    out = subprocess.run(
        [tool("systemd-analyze"), "security", "--offline=yes", str(path)],
        capture_output=True,
        text=True,
        cwd=path.parent,
        timeout=60,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", out.stdout)
    assert match, out.stdout + out.stderr
    return float(match.group(1))


def test_an_instance_of_the_template_is_as_sandboxed(tmp_path: Path):
    instance = tmp_path / "reconciler@prod.service"
    instance.write_text((SYSTEMD / "reconciler@.service").read_text())
    assert exposure(instance) <= EXPOSURE_MAX


@pytest.mark.parametrize("name", ["reconciler.service", "reconciler-sync.service"])
def test_systemd_analyze_security_exposure(name: str, tmp_path: Path):
    assert exposure(SYSTEMD / name) <= EXPOSURE_MAX
    # The same unit without its sandbox scores far worse: the parse is real.
    bare = tmp_path / name
    text = (SYSTEMD / name).read_text()
    bare.write_text(text[: text.index("# Sandboxing.")] + "\n[Install]\n")
    assert exposure(bare) > 5


def test_every_unit_in_systemd_dir_is_checked():
    assert sorted(p.name for p in SYSTEMD.iterdir()) == sorted(UNITS + DROP_INS)


# ---------------------------------------------------------------- the release

# What names a release, wherever it is written: an image tag, the version
# label, a chart's version, a link to a tag, check's line for a CRD.
RELEASE_MENTION = re.compile(
    r"(?:reconciler:|app\.kubernetes\.io/version: \"?|image\.tag=|/blob/v|of release )"
    r"(\d+\.\d+\.\d+)"
)
# Not swept: the history of releases, and the tests' own values (a test that
# compares with the release reads __version__; the 0.1.0 CRDs are a fixture).
NOT_SWEPT = ("CHANGELOG.md", "tests/")


def release_marks() -> dict[str, str]:
    """Each place that states the release, read as its reader reads it."""
    marks = {}
    for path in sorted(ROOT.glob("crds/*.yaml")) + sorted(ROOT.glob("dist/chart/crds/*.yaml")):
        crd = yaml.safe_load(path.read_text())
        marks[f"{path.relative_to(ROOT)} label"] = crd["metadata"]["labels"][LABEL_VERSION]
    chart = yaml.safe_load((ROOT / "dist" / "chart" / "Chart.yaml").read_text())
    marks["Chart.yaml version"] = chart["version"]
    marks["Chart.yaml appVersion"] = chart["appVersion"]
    for overlay, workload in (("daemon", "deployment.yaml"), ("cronjob", "cronjob.yaml")):
        (image,) = yaml.safe_load((CONFIG / overlay / "kustomization.yaml").read_text())["images"]
        marks[f"config/{overlay} newTag"] = image["newTag"]
        obj = docs(f"{overlay}/{workload}")[0]
        marks[f"config/{overlay}/{workload} label"] = obj["metadata"]["labels"][LABEL_VERSION]
        (container,) = pod_spec(f"{overlay}/{workload}")["containers"]
        marks[f"config/{overlay}/{workload} image"] = container["image"].rpartition(":")[2]
    return marks


def test_one_release_everywhere():
    """The package's version is the one source (setup.cfg reads it): the
    CRDs' label (that plan and check compare), the chart, the overlays'
    images, and every other mention in the tree say the same."""
    assert release_marks() == dict.fromkeys(release_marks(), __version__)
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = listed.stdout.split()
    others = {}
    for name in tracked:
        path = ROOT / name
        if name.startswith(NOT_SWEPT) or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found = {m[1] for m in RELEASE_MENTION.finditer(text)} - {__version__}
        if found:
            others[name] = found
    assert others == {}


def test_a_release_mention_is_found_where_it_is_written():
    """The pattern the sweep above uses finds each form it is for."""
    written = (
        "image: reconciler:9.8.7",
        'app.kubernetes.io/version: "9.8.7"',
        "--set image.tag=9.8.7",
        "https://git.example.com/platform/reconciler/blob/v9.8.7/docs/operations.md",
        "✓ CRDs: redis.myapp.demo.kubebuilder.io of release 9.8.7",
    )
    assert [m[1] for w in written for m in RELEASE_MENTION.finditer(w)] == ["9.8.7"] * 5
