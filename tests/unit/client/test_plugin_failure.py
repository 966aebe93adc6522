"""A credential that fails, fails once (issue 77, item 6), with real plugin
processes whose child keeps their stdout open: the timeout is a deadline
for the whole run, a failed run is the answer for the rest of the pass (the
plugin is not run again per request), and a reconciler that is stopped
kills every plugin's process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.client import errors, exec_plugin, kube
from reconciler.client.exec_plugin import CredentialError, ExecPlugin, ExecSpec
from reconciler.config import Config
from reconciler.model import PODS
from tests.unit.client.plugins import Plugin, all_gone
from tests.unit.fake_apiserver import FakeApiserver, fake_apiserver

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def api() -> Iterator[FakeApiserver]:
    yield from fake_apiserver()


@pytest.fixture
def hangs(tmp_path: Path) -> Iterator[Plugin]:
    plugin = Plugin.write(tmp_path, answers=False)
    yield plugin
    plugin.cleanup()


@pytest.fixture
def answers(tmp_path: Path) -> Iterator[Plugin]:
    plugin = Plugin.write(tmp_path, answers=True)
    yield plugin
    plugin.cleanup()


def _timed(call: object) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        call()  # type: ignore[operator]
    except Exception as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def test_a_plugin_that_answers_and_leaves_a_child_holding_its_stdout_is_not_waited_for(
    answers: Plugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its answer is taken once it has exited (the child's open pipe waited
    for TIMEOUT, then failed the run), and the child is killed."""
    monkeypatch.setattr(exec_plugin, "TIMEOUT", 6.0)
    got, took = _timed(lambda: ExecPlugin(ExecSpec(str(answers.script))).credential())
    assert got is None and took < 4.0, (got, took)
    assert all_gone(answers.pids()), "the plugin's child outlived it"


def test_a_plugin_that_hangs_fails_the_pass_once_then_runs_again_after_failed_for(
    api: FakeApiserver, hangs: Plugin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request waits out the deadline (its child holds the pipes:
    not longer), the next is told at once without a run, and none reaches
    the server. After FAILED_FOR the plugin is run again."""
    monkeypatch.setattr(exec_plugin, "TIMEOUT", 1.0)
    monkeypatch.setattr(exec_plugin, "FAILED_FOR", 3.0, raising=False)
    config = Config(kubeconfig=str(hangs.kubeconfig(api.url, tmp_path / "kubeconfig")))
    client = kube.Kube(config)
    first, took = _timed(lambda: client.get(PODS, "ns", "p"))
    assert isinstance(first, errors.NoCredentials) and took < 1.0 + 5, (first, took)
    assert all_gone(hangs.pids()), "the plugin's group outlived its deadline"
    again, took_again = _timed(lambda: client.list(PODS, "ns"))
    assert isinstance(again, errors.NoCredentials) and str(again) == str(first)
    assert hangs.runs() == 1 and took_again < 0.5, (hangs.runs(), took_again)
    assert api.requests == []
    time.sleep(3.0)
    _timed(lambda: client.get(PODS, "ns", "p"))
    assert hangs.runs() == 2


def test_stopping_kills_a_running_plugins_group_and_runs_none_again(
    hangs: Plugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exec_plugin, "TIMEOUT", 60.0)
    plugin = ExecPlugin(ExecSpec(str(hangs.script)))
    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: failed.append(_timed(plugin.credential)[0]))  # type: ignore[arg-type]
    thread.start()
    hangs.running()
    try:
        kube.stop_credential_plugins()
        thread.join(5.0)
        assert not thread.is_alive(), "the run outlived its plugin's kill"
        assert all_gone(hangs.pids())
        assert isinstance(failed[0], CredentialError) and "stopping" in str(failed[0])
        with pytest.raises(CredentialError, match="stopping"):
            ExecPlugin(ExecSpec(str(hangs.script))).credential()
        assert hangs.runs() == 1
    finally:
        exec_plugin._ENDED.clear()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_sync_stopped_by_a_signal_leaves_no_plugin_running(
    api: FakeApiserver, hangs: Plugin, tmp_path: Path, signum: int
) -> None:
    """The signal ends the process as before (SIGTERM and SIGHUP by their
    default action, SIGINT by KeyboardInterrupt), the plugin's group with it."""
    config = hangs.kubeconfig(api.url, tmp_path / "kubeconfig")
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "sync", "-n", "ns", "--kubeconfig", str(config)],
        cwd=ROOT,
        env={**os.environ, "RECONCILER_CONFIG": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        hangs.running()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, err[-2000:]
    assert all_gone(hangs.pids()), "the plugin outlived the reconciler"
