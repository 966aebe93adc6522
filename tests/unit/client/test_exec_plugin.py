"""reconciler.client.exec_plugin with real plugin processes: a script that
answers as `aws eks get-token` or `kubelogin` would, and logs its runs."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from reconciler.client import exec_plugin
from reconciler.client.exec_plugin import (
    MARGIN,
    CredentialError,
    ExecPlugin,
    ExecSpec,
)

V1, V1BETA1 = "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"
EXPIRES = "2026-11-26T10:00:00Z"
EXPIRES_AT = 1795687200.0  # EXPIRES as seconds since the epoch

PLUGIN = """#!{python}
import json, os, sys
log = {log!r}
with open(log, "a") as out:
    out.write(json.dumps({{"args": sys.argv[1:], "env": os.environ.get("PROFILE"),
        "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
        "stdin_tty": sys.stdin.isatty(), "stdin": sys.stdin.read()}}) + "\\n")
runs = sum(1 for _ in open(log))
mode = os.environ.get("MODE", "token")
if mode == "fail":
    print("could not talk to SSO", file=sys.stderr)
    print("Error: the SSO session has expired; run aws sso login", file=sys.stderr)
    sys.exit(255)
status = {{"token": "token-%d" % runs, "expirationTimestamp": {expires!r}}}
if mode == "cert":
    status = {{"clientCertificateData": "CERT", "clientKeyData": "KEY"}}
if mode == "nothing":
    status = {{}}
print(json.dumps({{"apiVersion": os.environ.get("ANSWER", {version!r}),
                  "kind": "ExecCredential", "status": status}}))
"""


def plugin(tmp_path: Path, version: str = V1, expires: str = EXPIRES) -> tuple[Path, Path]:
    log = tmp_path / "runs.log"
    script = tmp_path / "get-token"
    script.write_text(
        PLUGIN.format(python=sys.executable, log=str(log), expires=expires, version=version)
    )
    script.chmod(0o755)
    return script, log


def runs(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("version", [V1, V1BETA1])
def test_the_token_is_kept_until_just_before_it_expires(tmp_path: Path, version: str) -> None:
    script, log = plugin(tmp_path, version)
    spec = ExecSpec(str(script), ("eks", "get-token"), (("PROFILE", "prod"),), version)
    clock = Clock(EXPIRES_AT - 3600)
    exec_ = ExecPlugin(spec, clock)
    assert {exec_.credential().token for _ in range(50)} == {"token-1"}
    clock.now = EXPIRES_AT - MARGIN - 0.1
    assert exec_.credential().token == "token-1"
    clock.now = EXPIRES_AT - MARGIN
    assert exec_.credential().token == "token-2"
    first = runs(log)[0]
    assert first["args"] == ["eks", "get-token"] and first["env"] == "prod"
    assert first["info"] == {
        "apiVersion": version,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
    assert first["stdin_tty"] is False and first["stdin"] == ""


def test_a_token_that_lives_seconds_is_used_for_half_its_life(tmp_path: Path) -> None:
    script, _ = plugin(tmp_path)
    clock = Clock(EXPIRES_AT - 4)
    exec_ = ExecPlugin(ExecSpec(str(script)), clock)
    assert exec_.credential().token == "token-1"
    clock.now = EXPIRES_AT - 2.1
    assert exec_.credential().token == "token-1"
    clock.now = EXPIRES_AT - 2
    assert exec_.credential().token == "token-2"


def test_threads_that_need_a_credential_at_once_run_the_plugin_once(tmp_path: Path) -> None:
    script, log = plugin(tmp_path)
    exec_ = ExecPlugin(ExecSpec(str(script)), Clock(EXPIRES_AT - 3600))
    got: list[str | None] = []
    threads = [
        threading.Thread(target=lambda: got.append(exec_.credential().token)) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["token-1"] * 8 and len(runs(log)) == 1


def test_a_401_runs_the_plugin_once_for_every_thread_it_refused(tmp_path: Path) -> None:
    script, log = plugin(tmp_path)
    exec_ = ExecPlugin(ExecSpec(str(script)), Clock(EXPIRES_AT - 3600))
    refused = exec_.credential()
    assert exec_.refused(refused).token == "token-2"
    assert exec_.refused(refused).token == "token-2"  # another thread, refused the same one
    assert len(runs(log)) == 2


def test_a_certificate_is_a_credential_and_nothing_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _ = plugin(tmp_path)
    monkeypatch.setenv("MODE", "cert")
    cred = ExecPlugin(ExecSpec(str(script))).credential()
    assert (cred.token, cred.cert_pem, cred.key_pem, cred.expires) == (None, b"CERT", b"KEY", None)
    monkeypatch.setenv("MODE", "nothing")
    with pytest.raises(CredentialError, match=r"^exec plugin get-token: neither a token nor"):
        ExecPlugin(ExecSpec(str(script))).credential()


def test_a_failing_plugin_is_one_line_with_its_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _ = plugin(tmp_path)
    monkeypatch.setenv("MODE", "fail")
    with pytest.raises(CredentialError) as failed:
        ExecPlugin(ExecSpec(str(script))).credential()
    assert str(failed.value) == (
        "exec plugin get-token exited 255: Error: the SSO session has expired; run aws sso login"
    )


def test_a_missing_plugin_names_itself_and_how_to_install_it() -> None:
    hint = "kubelogin is not installed.\nSee https://azure.github.io/kubelogin"
    spec = ExecSpec("kubelogin-not-here", install_hint=hint)
    with pytest.raises(CredentialError) as missing:
        ExecPlugin(spec).credential()
    assert (
        str(missing.value)
        == "exec plugin kubelogin-not-here: not found; kubelogin is not installed."
    )


def test_an_answer_in_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _ = plugin(tmp_path)
    monkeypatch.setenv("ANSWER", V1BETA1)
    with pytest.raises(CredentialError, match=r"answered 'client\.authentication\S*/v1beta1'"):
        ExecPlugin(ExecSpec(str(script), api_version=V1)).credential()


def test_a_plugin_that_wants_a_terminal_is_refused_without_running(tmp_path: Path) -> None:
    script, log = plugin(tmp_path)
    with pytest.raises(CredentialError, match="interactiveMode Always needs a terminal"):
        ExecPlugin(ExecSpec(str(script), interactive_mode="Always")).credential()
    assert runs(log) == []


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, not yet reaped by pid 1, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("child_keeps_the_pipes", [False, True])
def test_a_plugin_that_hangs_is_killed_with_its_children_at_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child_keeps_the_pipes: bool
) -> None:
    monkeypatch.setattr(exec_plugin, "TIMEOUT", 0.5)
    pid_file, script = tmp_path / "child.pid", tmp_path / "hangs"
    detach = "" if child_keeps_the_pipes else " </dev/null >/dev/null 2>&1"
    script.write_text(f"#!/bin/sh\nsleep 20{detach} &\necho $! > {pid_file}\nexec sleep 20\n")
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(CredentialError, match=r"^exec plugin hangs: no answer in "):
        ExecPlugin(ExecSpec(str(script))).credential()
    assert time.monotonic() - started < 5  # not the 20 s of a child holding its pipes
    child = int(pid_file.read_text())
    try:
        assert _gone_within(child, 2.0), "the plugin's child outlived it"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_plugin_that_prints_without_end_is_cut_off_at_a_mebibyte(tmp_path: Path) -> None:
    script = tmp_path / "chatty"
    script.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        "sys.stdout.write('x' * (2 << 20))\nsys.stdout.flush()\ntime.sleep(20)\n"
    )
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(CredentialError) as chatty:
        ExecPlugin(ExecSpec(str(script))).credential()
    assert str(chatty.value) == (
        "exec plugin chatty: printed more than 1 MiB; an ExecCredential is a few KB"
    )
    assert time.monotonic() - started < 5  # killed, not waited for


def test_a_plugin_that_fails_at_length_is_said_by_its_last_line(tmp_path: Path) -> None:
    script = tmp_path / "noisy"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "sys.stderr.write('retrying the SSO endpoint\\n' * 100000)\n"
        "print('Error: the SSO session has expired', file=sys.stderr)\nsys.exit(3)\n"
    )
    script.chmod(0o755)
    with pytest.raises(CredentialError) as failed:
        ExecPlugin(ExecSpec(str(script))).credential()
    assert str(failed.value) == "exec plugin noisy exited 3: Error: the SSO session has expired"
