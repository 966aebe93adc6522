"""The kubeconfig reader: kubectl's rules for contexts, file references and
inline data, the pod's service account, and no requests in memory."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.client import kubeconfig
from reconciler.client.kubeconfig import KubeconfigError

from .imports import loaded_after


def _write(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], **ctx: Any) -> Path:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": "https://k:6443", **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "one", "context": {"cluster": "c", "user": "u", **ctx}},
            {"name": "two", "context": {"cluster": "c", "user": "u", "namespace": "b"}},
        ],
        "current-context": "one",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_file_references_are_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    for name in ("ca.crt", "me.crt", "me.key", "token"):
        (tmp_path / "pki" / name).write_text(name)
    user = {
        "client-certificate": "pki/me.crt",
        "client-key": "pki/me.key",
        "tokenFile": "pki/token",
    }
    config = kubeconfig.from_file(_write(tmp_path, {"certificate-authority": "pki/ca.crt"}, user))
    assert config.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert (config.cert_file, config.key_file) == (
        str(tmp_path / "pki" / "me.crt"),
        str(tmp_path / "pki" / "me.key"),
    )
    assert config.token_file == tmp_path / "pki" / "token"
    assert (config.server, config.context, config.namespace) == ("https://k:6443", "one", None)


def test_inline_certificates_go_to_one_private_file_each(tmp_path: Path) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
    cluster = {"certificate-authority-data": base64.b64encode(pem).decode()}
    path = _write(tmp_path, cluster, {"token": "t"})
    first, again = kubeconfig.from_file(path), kubeconfig.from_file(path)
    assert first.ca_file is not None and first.ca_file == again.ca_file
    assert Path(first.ca_file).read_bytes() == pem
    assert stat.S_IMODE(Path(first.ca_file).stat().st_mode) == 0o600
    assert first.token == "t" and not first.only_pykube
    assert not first.disable_compression and not first.insecure
    flags = {"disable-compression": True, "insecure-skip-tls-verify": True}
    both = kubeconfig.from_file(_write(tmp_path, flags, {"token": "t"}))
    assert both.disable_compression and both.insecure
    as_kubectl = {"disable-compression": "y", "insecure-skip-tls-verify": None}
    read = kubeconfig.from_file(_write(tmp_path, as_kubectl, {"token": "t"}))
    assert read.disable_compression and not read.insecure


def test_a_named_context_wins_and_an_unknown_one_lists_those_there_are(tmp_path: Path) -> None:
    path = _write(tmp_path, {}, {"token": "t"})
    assert kubeconfig.from_file(path, "two").namespace == "b"
    with pytest.raises(KubeconfigError, match=r"context 'three' not found .*\(have: one, two\)"):
        kubeconfig.from_file(path, "three")


@pytest.mark.parametrize(
    ("cluster", "user", "message"),
    [
        (
            {"certificate-authority": "gone.crt"},
            {},
            r"certificate-authority \S+/gone\.crt: no such",
        ),
        ({"certificate-authority-data": "%%%"}, {}, "certificate-authority-data is not base64"),
        ({}, {"client-key": "/nowhere/k"}, "client-key /nowhere/k: no such file"),
        ({"disable-compression": "false"}, {}, "disable-compression: 'false' is not true or"),
        ({"insecure-skip-tls-verify": "no"}, {}, "insecure-skip-tls-verify: 'no' is not true"),
    ],
)
def test_a_bad_field_is_named(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], message: str
) -> None:
    with pytest.raises(KubeconfigError, match=message):
        kubeconfig.from_file(_write(tmp_path, cluster, user))


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({}, {"exec": {"command": "get-token"}}),
        ({}, {"auth-provider": {"name": "oidc"}}),
        ({"tls-server-name": "api"}, {"token": "t"}),
    ],
)
def test_what_only_pykube_knows_is_marked(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    assert kubeconfig.from_file(_write(tmp_path, cluster, user)).only_pykube


@pytest.mark.parametrize(
    ("section", "body", "message"),
    [
        ("clusters", None, r"clusters\[c\]\.cluster: not a mapping"),
        ("clusters", "https://k", r"clusters\[c\]\.cluster: not a mapping"),
        ("contexts", ["c"], r"contexts\[one\]\.context: not a mapping"),
        ("users", "u", r"users\[u\]\.user: not a mapping"),
    ],
)
def test_an_entry_that_is_not_a_mapping_is_named(
    tmp_path: Path, section: str, body: object, message: str
) -> None:
    path = _write(tmp_path, {}, {"token": "t"})
    doc = yaml.safe_load(path.read_text())
    key = section[:-1]
    if body is None:
        del doc[section][0][key]
    else:
        doc[section][0][key] = body
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(KubeconfigError, match=message):
        kubeconfig.from_file(path)


def test_not_a_kubeconfig_says_so(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("- a list\n")
    with pytest.raises(KubeconfigError, match="not a kubeconfig"):
        kubeconfig.from_file(path)


def test_the_service_account_of_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "namespace").write_text("ops\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    pod = kubeconfig.in_cluster(tmp_path)
    assert pod is not None
    assert (pod.server, pod.namespace, pod.token_file) == (
        "https://[fd00::1]:443",
        "ops",
        tmp_path / "token",
    )
    assert pod.ca_file == str(tmp_path / "ca.crt") and pod.token is None
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert kubeconfig.in_cluster(tmp_path) is None


def test_the_cli_and_the_daemon_start_without_requests_or_pykube() -> None:
    """They cost about 6 MB of resident memory that static credentials never use."""
    modules = "reconciler.cli, reconciler.run.daemon, reconciler.run.wait"
    assert loaded_after(modules, {"requests", "pykube", "urllib3"}) == []
