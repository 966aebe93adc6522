"""bench/fleet.py: the verdicts and medians it prints, from made-up rounds."""

from __future__ import annotations

import math

from bench.fleet import median_of, table, verdicts


def rounds(one: float | None, two: float, rss: float, cpu: float) -> dict:
    return {"walls": {"one": one, "two": two}, "max_rss_mb": rss, "steady_cpu_per_round": cpu}


def test_the_worst_cluster_decides_the_time_verdict():
    fleet = median_of([rounds(60.0, 50.0, 70.0, 0.5)])
    apart = median_of([rounds(40.0, 50.0, 120.0, 0.5)])
    judged = verdicts(fleet, apart)
    assert judged["time to the end state, worst cluster"] == {
        "measured": 1.5,
        "target": 1.2,
        "pass": False,
    }
    assert judged["peak RSS"]["pass"] and judged["peak RSS"]["measured"] == 0.583
    assert judged["client CPU per steady round"]["measured"] == 1.0


def test_a_round_that_never_reached_the_end_state_is_infinitely_slow_not_missing():
    fleet = median_of([rounds(None, 50.0, 70.0, 0.5), rounds(None, 51.0, 70.0, 0.5)])
    assert math.isinf(fleet["walls"]["one"])
    judged = verdicts(fleet, median_of([rounds(40.0, 50.0, 120.0, 0.5)]))
    assert not judged["time to the end state, worst cluster"]["pass"]


def test_the_table_shows_each_contender_and_each_verdict():
    results = {
        "fleet": [rounds(60.0, 50.0, 70.0, 0.5)],
        "apart": [rounds(40.0, 50.0, 120.0, 0.6)],
    }
    text = table(1000, results, verdicts(*(median_of(results[k]) for k in ("fleet", "apart"))))
    assert "| one process, both contexts | 60.00, 50.00 | 70 | 0.500 |" in text
    assert "| time to the end state, worst cluster | 1.50x | 1.2x | FAIL |" in text


def test_publish_writes_the_run_with_its_command_and_prints_where(tmp_path, monkeypatch, capsys):
    import json

    from bench import run

    monkeypatch.setattr(run, "RESULTS", tmp_path)
    out = run.publish("fleet", "20990101T000000Z", ["--n", "5"], {"table": "| t |", "x": 1})
    assert out == tmp_path / "fleet-20990101T000000Z.json"
    doc = json.loads(out.read_text())
    assert doc == {"command": "python -m bench.fleet --n 5", "table": "| t |", "x": 1}
    assert capsys.readouterr().out == f"| t |\n\nresults: {out}\n"
