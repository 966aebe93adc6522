"""The variables a kubelet gives a pod for each Service of its namespace
(pkg/kubelet/envvars) are no settings: a Service named reconciler or
reconciler-metrics beside our pods must not stop them with "unknown variable",
and no setting may ever be taken for one of them."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.cli.settings import (
    CONFIG_FILE_ENV,
    ENV_PREFIX,
    KEYS,
    PROTOCOLS,
    SERVICE_LINK_SHAPE,
    Layers,
    load,
)
from reconciler.config import Config, ConfigError

# What a kubelet set, written out, for the chart's Service reconciler-metrics
# (cluster IP 10.0.0.7, port metrics 8080/TCP) and a Service reconciler
# (10.0.0.8, an unnamed 6379/TCP first, then dns 53/UDP).
METRICS_SERVICE = {
    "RECONCILER_METRICS_SERVICE_HOST": "10.0.0.7",
    "RECONCILER_METRICS_SERVICE_PORT": "8080",
    "RECONCILER_METRICS_SERVICE_PORT_METRICS": "8080",
    "RECONCILER_METRICS_PORT": "tcp://10.0.0.7:8080",
    "RECONCILER_METRICS_PORT_8080_TCP": "tcp://10.0.0.7:8080",
    "RECONCILER_METRICS_PORT_8080_TCP_PROTO": "tcp",
    "RECONCILER_METRICS_PORT_8080_TCP_PORT": "8080",
    "RECONCILER_METRICS_PORT_8080_TCP_ADDR": "10.0.0.7",
}
RECONCILER_SERVICE = {
    "RECONCILER_SERVICE_HOST": "10.0.0.8",
    "RECONCILER_SERVICE_PORT": "6379",
    "RECONCILER_SERVICE_PORT_DNS": "53",
    "RECONCILER_PORT": "tcp://10.0.0.8:6379",
    "RECONCILER_PORT_6379_TCP": "tcp://10.0.0.8:6379",
    "RECONCILER_PORT_6379_TCP_PROTO": "tcp",
    "RECONCILER_PORT_6379_TCP_PORT": "6379",
    "RECONCILER_PORT_6379_TCP_ADDR": "10.0.0.8",
    "RECONCILER_PORT_53_UDP": "udp://10.0.0.8:53",
    "RECONCILER_PORT_53_UDP_PROTO": "udp",
    "RECONCILER_PORT_53_UDP_PORT": "53",
    "RECONCILER_PORT_53_UDP_ADDR": "10.0.0.8",
}
# Every pod has the apiserver's, from the default namespace.
KUBERNETES_SERVICE = {
    "KUBERNETES_SERVICE_HOST": "10.0.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.0.0.1:443",
}
POD_ENV = {**KUBERNETES_SERVICE, **METRICS_SERVICE, **RECONCILER_SERVICE}


def kubelet_env(name: str, ip: str, ports: list[tuple[str, int, str]]) -> dict[str, str]:
    """pkg/kubelet/envvars FromServices for one Service: ``ports`` as (name,
    port, protocol); only the first may have no name."""
    svc = name.upper().replace("-", "_")
    hostport = (lambda p: f"[{ip}]:{p}") if ":" in ip else (lambda p: f"{ip}:{p}")
    env = {f"{svc}_SERVICE_HOST": ip, f"{svc}_SERVICE_PORT": str(ports[0][1])}
    for port_name, port, _ in ports:
        if port_name:
            env[f"{svc}_SERVICE_PORT_{port_name.upper().replace('-', '_')}"] = str(port)
    env[f"{svc}_PORT"] = f"{ports[0][2].lower()}://{hostport(ports[0][1])}"
    for _, port, proto in ports:
        prefix = f"{svc}_PORT_{port}_{proto}"
        env[prefix] = f"{proto.lower()}://{hostport(port)}"
        env[f"{prefix}_PROTO"] = proto.lower()
        env[f"{prefix}_PORT"] = str(port)
        env[f"{prefix}_ADDR"] = ip
    return env


def test_the_generator_writes_what_a_kubelet_writes():
    assert kubelet_env("reconciler-metrics", "10.0.0.7", [("metrics", 8080, "TCP")]) == (
        METRICS_SERVICE
    )
    ports = [("", 6379, "TCP"), ("dns", 53, "UDP")]
    assert kubelet_env("reconciler", "10.0.0.8", ports) == RECONCILER_SERVICE


def test_a_pod_beside_our_services_loads_the_defaults():
    """The environment of a pod in a namespace with the Services
    reconciler-metrics and reconciler: no error, no setting taken."""
    assert Layers.read(None, POD_ENV).env == {}
    assert load(None, {}, POD_ENV) == Config()


def test_the_settings_of_the_shipped_pods_are_read_beside_the_links():
    env = {**POD_ENV, "RECONCILER_INTERVAL": "30", "RECONCILER_LOG_FORMAT": "json"}
    assert Layers.read(None, env).env == {"interval": 30.0, "log_format": "json"}


def test_an_ipv6_service_with_an_sctp_port():
    env = kubelet_env("reconciler-v6", "fd00::7", [("assoc", 9899, "SCTP"), ("m", 80, "TCP")])
    assert env["RECONCILER_V6_PORT"] == "sctp://[fd00::7]:9899"
    assert load(None, {}, env) == Config()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # A mistyped setting with a link's name but not a link's value.
        ("RECONCILER_METRICS_PORT", "9090"),
        ("RECONCILER_METRICS_PORT_8080_TCP_ADDR", "10.0.0.9"),
        ("RECONCILER_METRICS_PORT_8080_TCP_PORT", "8081"),
        ("RECONCILER_METRICS_PORT_8080_TCP_PROTO", "udp"),
        ("RECONCILER_METRICS_PORT_8080_TCP", "tcp://10.0.0.7:8081"),
        ("RECONCILER_METRICS_SERVICE_PORT_METRICS", "eighty"),
        # A link's name after no Service's <SVC>_SERVICE_HOST.
        ("RECONCILER_OTHER_SERVICE_PORT", "8080"),
        ("RECONCILER_OTHER_PORT", "tcp://10.0.0.7:8080"),
        # Not the kubelet's spelling.
        ("RECONCILER_METRICS_PORT_8080_tcp", "tcp://10.0.0.7:8080"),
        ("RECONCILER_METRICS_PORT_8080_ICMP", "icmp://10.0.0.7:8080"),
        ("RECONCILER_METRICS_PORT", "http://10.0.0.7:8080"),
        ("RECONCILER_metrics_SERVICE_HOST", "10.0.0.7"),
    ],
)
def test_what_is_not_a_kubelets_link_is_still_an_unknown_variable(name: str, value: str):
    env = {**METRICS_SERVICE, name: value}
    with pytest.raises(ConfigError, match=f"{name}: unknown variable"):
        load(None, {}, env)


def test_a_service_host_that_is_no_address_is_an_unknown_variable():
    with pytest.raises(ConfigError, match="RECONCILER_METRICS_SERVICE_HOST: unknown variable"):
        load(None, {}, {"RECONCILER_METRICS_SERVICE_HOST": "metrics.local"})


def test_no_settings_variable_has_the_shape_of_a_service_link():
    """Else a Service of that name would set it, or its setting be ignored:
    a key named metrics_port, service_host, ... must fail here."""
    names = [CONFIG_FILE_ENV, *(f"{ENV_PREFIX}{key.upper()}" for key in KEYS)]
    assert [n for n in names if SERVICE_LINK_SHAPE.fullmatch(n)] == []
    # The check sees every shape, whatever the Service is called.
    for shaped in [*POD_ENV, "RECONCILER_SERVICE_PORT_SERVICE_PORT", "RECONCILER_A_PORT"]:
        assert SERVICE_LINK_SHAPE.fullmatch(shaped), shaped
    for key in ("metrics_port", "service_host", "proxy_service_port", "port_1_udp_addr"):
        assert SERVICE_LINK_SHAPE.fullmatch(f"{ENV_PREFIX}{key.upper()}"), key


def test_a_setting_is_read_even_beside_a_service_of_its_prefix():
    """A Service reconciler-leader-election gives RECONCILER_LEADER_ELECTION_*
    links; RECONCILER_LEADER_ELECTION_ID stays a setting."""
    env = kubelet_env("reconciler-leader-election", "10.0.0.9", [("m", 80, "TCP")])
    env["RECONCILER_LEADER_ELECTION_ID"] = "mine"
    assert Layers.read(None, env).env == {"leader_election_id": "mine"}


# A Service's name (a DNS-1035 label) and a port's (an IANA service name):
# words of lower-case letters and digits joined by "-"; a port's has a letter.
_WORDS = st.lists(
    st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=4), max_size=3
)
SERVICE_NAMES = _WORDS.map(lambda words: "-".join(["reconciler", *words]))
PORT_NAMES = _WORDS.map(lambda words: "-".join(["p", *words])[:15].strip("-"))
IPS = st.ip_addresses().map(str)
PORTS = st.lists(
    st.tuples(PORT_NAMES, st.integers(1, 65535), st.sampled_from(PROTOCOLS)),
    min_size=1,
    max_size=4,
    # As the apiserver's validation: names unique, and ports with their protocol.
    unique_by=(lambda p: p[0], lambda p: (p[1], p[2])),
)


@given(st.lists(st.tuples(SERVICE_NAMES, IPS, PORTS), max_size=4, unique_by=lambda s: s[0]))
def test_no_services_of_any_names_stop_the_settings(services):
    env: dict[str, str] = {}
    for name, ip, ports in services:
        env |= kubelet_env(name, ip, ports)
    env["RECONCILER_INTERVAL"] = "7"
    assert Layers.read(None, env).env == {"interval": 7.0}
