"""The kubeconfig reader: kubectl's rules for contexts, file references and
inline data, the pod's service account, and no requests in memory."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.client import kubeconfig
from reconciler.client.exec_plugin import ExecPlugin
from reconciler.client.kubeconfig import KubeconfigError
from tests.unit.imports import loaded_after


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


def test_only_an_auth_provider_is_left_to_pykube(tmp_path: Path) -> None:
    assert kubeconfig.from_file(
        _write(tmp_path, {}, {"auth-provider": {"name": "oidc"}})
    ).only_pykube
    exec_user = {"exec": {"apiVersion": V1BETA1, "command": "get-token"}}
    for cluster, user in [({}, exec_user), ({"tls-server-name": "api"}, {"token": "t"})]:
        assert not kubeconfig.from_file(_write(tmp_path, cluster, user)).only_pykube


V1, V1BETA1 = "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"


def test_an_exec_section_is_read_with_the_cluster_it_may_be_given(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA")
    cluster = {
        "certificate-authority": "ca.crt",
        "tls-server-name": "api.internal",
        "proxy-url": "http://proxy:3128",
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"a": 1}}],
    }
    user = {
        "exec": {
            "apiVersion": V1,
            "command": "aws",
            "args": ["eks", "get-token"],
            "env": [{"name": "AWS_PROFILE", "value": "prod"}],
            "interactiveMode": "Never",
            "provideClusterInfo": True,
            "installHint": "install the AWS CLI",
        }
    }
    config = kubeconfig.from_file(_write(tmp_path, cluster, user))
    spec = config.exec
    assert spec is not None and config.tls_server_name == "api.internal"
    assert config.proxy_url == "http://proxy:3128"
    assert (spec.command, spec.args, spec.env) == (
        "aws",
        ("eks", "get-token"),
        (("AWS_PROFILE", "prod"),),
    )
    assert (spec.interactive_mode, spec.install_hint) == ("Never", "install the AWS CLI")
    info = json.loads(spec.exec_info())
    assert info["apiVersion"] == V1 and info["spec"]["interactive"] is False
    assert info["spec"]["cluster"] == {
        "server": "https://k:6443",
        "tls-server-name": "api.internal",
        "proxy-url": "http://proxy:3128",
        "certificate-authority-data": "Q0E=",
        "config": {"a": 1},
    }


@pytest.mark.parametrize(
    ("exec_", "message"),
    [
        ({"apiVersion": V1}, r"exec\.command: missing"),
        (
            {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"},
            r"exec\.apiVersion: 'client",
        ),
        ({"command": "x", "apiVersion": V1}, r"exec\.interactiveMode: required by"),
        (
            {"command": "x", "apiVersion": V1BETA1, "interactiveMode": "Sometimes"},
            r"exec\.interactiveMode: 'Sometimes'",
        ),
        ({"command": "x", "apiVersion": V1BETA1, "env": ["A=b"]}, r"exec\.env\[0\]: not a name"),
    ],
)
def test_a_bad_exec_section_is_refused_naming_the_field(
    tmp_path: Path, exec_: dict[str, Any], message: str
) -> None:
    with pytest.raises(kubeconfig.KubeconfigError, match=r"users\[u\]\.user\." + message):
        kubeconfig.from_file(_write(tmp_path, {}, {"exec": exec_}))


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


SECRET = "sekrit-0123456789abcdef"
_HEAD = "clusters:\n- name: c\n  cluster:\n    server: https://k:6443\nusers:\n- name: u\n  user:\n"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (f"    token: {SECRET}: half-written\n", "line 8: could not parse YAML (mapping values"),
        (f'    token: "{SECRET}\n', "line 9: could not parse YAML (found unexpected end"),
        (f"    token: *{SECRET}\n", "line 8: could not parse YAML (found undefined alias …)"),
        (f"    token: !{SECRET} x\n", "line 8: could not parse YAML (could not determine a"),
        (f"    token: &{SECRET} x\n    key: &{SECRET} y\n", "line 9: could not parse YAML"),
        (f"    token: [{SECRET}\n", "line 9: could not parse YAML (expected ',' or ']', but"),
        (f"    token: {SECRET}\n\t\n", "line 9: could not parse YAML (found character '\\t'"),
        (f"    token: {SECRET}\xff\n", "line 8: not UTF-8 or UTF-16 text (invalid start byte)"),
    ],
)
def test_a_kubeconfig_that_is_not_yaml_says_where_and_never_quotes_a_line(
    tmp_path: Path, body: str, says: str
) -> None:
    path = tmp_path / "config"
    path.write_bytes((_HEAD + body).encode("latin1"))
    with pytest.raises(KubeconfigError) as bad:
        kubeconfig.from_file(path)
    assert str(bad.value).startswith(f"kubeconfig {path}: {says}")
    _assert_quotes_nothing(bad.value, path)
    with pytest.raises(KubeconfigError) as again:
        kubeconfig.context_names(path)
    _assert_quotes_nothing(again.value, path)


def _assert_quotes_nothing(exc: BaseException, path: Path) -> None:
    """No secret in the message, and no line of the file longer than a word."""
    text = f"{exc} {exc!r}"
    assert SECRET not in text and SECRET[:8] not in text
    lines = path.read_bytes().decode("latin1").splitlines()
    assert not [line for line in lines if len(line.strip()) > 8 and line.strip() in text]
    assert exc.__cause__ is None and exc.__suppress_context__  # no traceback of PyYAML's


@pytest.mark.parametrize(
    ("cluster", "user", "says"),
    [
        ({"insecure-skip-tls-verify": f"token {SECRET}"}, {}, "a string of 29 characters is"),
        ({}, {"exec": {"command": "x", "apiVersion": {"token": SECRET}}}, "a mapping is not"),
        (
            {},
            {"exec": {"command": "x", "apiVersion": V1BETA1, "interactiveMode": [SECRET]}},
            "a list",
        ),
        ({"certificate-authority-data": 12345}, {}, "certificate-authority-data is not base64"),
    ],
)
def test_a_field_of_the_wrong_type_is_named_by_its_type_not_its_value(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], says: str
) -> None:
    path = _write(tmp_path, cluster, {"token": SECRET, **user})
    with pytest.raises(KubeconfigError, match=says) as bad:
        kubeconfig.from_file(path)
    assert SECRET not in str(bad.value)


def test_a_section_that_is_not_a_list_is_a_kubeconfig_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("current-context: x\ncontexts: 7\n")
    with pytest.raises(KubeconfigError, match=r"contexts: 7, not a list"):
        kubeconfig.from_file(path)
    with pytest.raises(KubeconfigError, match=r"contexts: 7, not a list"):
        kubeconfig.context_names(path)


def test_sync_with_a_half_written_kubeconfig_prints_where_and_not_the_token(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from reconciler.cli import commands

    path = tmp_path / "config"
    path.write_text(_HEAD + f"    token: {SECRET}: half-written\n")
    for output in ([], ["-o", "json"]):
        args = ["sync", "--kubeconfig", str(path), *output]
        result = CliRunner().invoke(commands.cli, args, env={}, catch_exceptions=False)
        assert result.exit_code == 2, result.output
        assert f"kubeconfig {path}: line 8: could not parse YAML" in result.output
        assert SECRET not in result.output and SECRET not in result.stderr


_LOAD_AND_SAY = """
import json, os, sys, tempfile
from pathlib import Path
from reconciler.client import kubeconfig
ca = Path(kubeconfig.from_file(Path(sys.argv[1])).ca_file)
st = ca.parent.lstat()
print(json.dumps({"file": str(ca), "pem": ca.read_text(), "uid": st.st_uid,
                  "mode": st.st_mode & 0o7777, "same_dir_again": str(Path(
                  kubeconfig.from_file(Path(sys.argv[1])).ca_file)) == str(ca)}))
"""


def _load_in_a_process(path: Path, env: dict[str, str]) -> dict[str, Any]:
    """Loads ``path`` in a process of its own (the directory is one a process)."""
    root = Path(kubeconfig.__file__).parents[2]  # the checkout whose package this is
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_SAY, str(path)],
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    said: dict[str, Any] = json.loads(done.stdout)
    return said


PEM = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("runtime_dir", ["ours", "shared", "a file", "unset"])
def test_inline_certificate_data_goes_to_a_directory_of_this_process_removed_at_exit(
    tmp_path: Path, runtime_dir: str
) -> None:
    tmp, run = tmp_path / "tmp", tmp_path / "run"
    tmp.mkdir()
    if runtime_dir == "a file":
        run.write_text("")
    else:
        run.mkdir(mode=0o700 if runtime_dir == "ours" else 0o777)
        run.chmod(0o700 if runtime_dir == "ours" else 0o777)
    planted = tmp / f"reconciler-{os.getuid()}-{hashlib.sha256(PEM).hexdigest()[:32]}.pem"
    planted.write_bytes(PEM)  # where the reconciler before looked first, in a shared /tmp
    cluster = {"certificate-authority-data": base64.b64encode(PEM).decode()}
    path = _write(tmp_path, cluster, {"token": "t"})
    env = {"TMPDIR": str(tmp), "XDG_RUNTIME_DIR": str(run) if runtime_dir != "unset" else ""}
    said = _load_in_a_process(path, env)
    ca = Path(said["file"])
    assert ca != planted and said["pem"] == PEM.decode() and said["same_dir_again"]
    assert ca.parent.parent == (run if runtime_dir == "ours" else tmp)
    assert ca.parent.name.startswith("reconciler-") and len(ca.parent.name) > len("reconciler-")
    assert (said["mode"], said["uid"]) == (0o700, os.getuid())
    assert not ca.parent.exists()  # removed when the process exited
    assert planted.exists()  # not ours to remove either


def test_a_relative_exec_command_is_found_from_the_kubeconfigs_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for where, token in (("kube", "from-beside-the-kubeconfig"), ("elsewhere", "from-the-cwd")):
        (tmp_path / where / "bin").mkdir(parents=True)
        answer = {"apiVersion": V1, "kind": "ExecCredential", "status": {"token": token}}
        plugin = tmp_path / where / "bin" / "cred"
        plugin.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
        plugin.chmod(0o755)
    exec_ = {"apiVersion": V1, "command": "./bin/cred", "interactiveMode": "Never"}
    path = _write(tmp_path / "kube", {}, {"exec": exec_})
    monkeypatch.chdir(tmp_path / "elsewhere")
    spec = kubeconfig.from_file(path).exec
    assert spec is not None and spec.command == str(tmp_path / "kube" / "bin" / "cred")
    assert ExecPlugin(spec).credential().token == "from-beside-the-kubeconfig"
    for command in ("get-token", "/usr/local/bin/get-token"):  # on the PATH, or absolute
        exec_["command"] = command
        spec = kubeconfig.from_file(_write(tmp_path / "kube", {}, {"exec": exec_})).exec
        assert spec is not None and spec.command == command
