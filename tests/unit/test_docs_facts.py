"""What the docs state of the exit codes, the settings and their defaults is
what the code does: each fact has one home, and a change of the code that
leaves a doc behind fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest

from reconciler.cli import commands
from reconciler.cli.settings import CONFIG_FILE_ENV, ENV_PREFIX, KEYS
from reconciler.run import turn

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
)
SHIPPED = [
    *(ROOT / "config").rglob("*.yaml"),
    *(ROOT / "dist" / "chart").rglob("*.yaml"),
    *(ROOT / "systemd").glob("*"),
]
TABLE_ROW = re.compile(r"^\| (\d) \| (.+) \|$")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def exit_code_tables() -> dict[Path, dict[int, str]]:
    """Every table whose rows start with a one-digit code, by file."""
    found: dict[Path, dict[int, str]] = {}
    for doc in DOCS:
        rows = {int(m[1]): m[2] for m in map(TABLE_ROW.match, text(doc).splitlines()) if m}
        if rows:
            found[doc] = rows
    return found


def test_the_exit_codes_have_one_home_and_it_lists_the_code_s():
    tables = exit_code_tables()
    assert list(tables) == [ROOT / "README.md"], "the exit codes are told in one table"
    readme = tables[ROOT / "README.md"]
    codes = {
        turn.EXIT_OK,
        turn.EXIT_FAILED,
        turn.EXIT_USAGE,
        turn.EXIT_UNREACHABLE,
        turn.EXIT_TIMEOUT,
    }
    assert set(readme) == codes
    assert "--wait" in readme[turn.EXIT_TIMEOUT]
    assert "unreachable" in readme[turn.EXIT_UNREACHABLE]
    assert "config" in readme[turn.EXIT_USAGE]


# "(0 converged, 1 some objects failed, ...": the codes told again in prose.
RETOLD = re.compile(r"\(0 [a-z][^,;)]*[,;] 1 [a-z]")


def test_no_other_doc_tells_the_exit_codes_again():
    retold = [
        str(doc.relative_to(ROOT)) for doc in DOCS if RETOLD.search(re.sub(r"\s+", " ", text(doc)))
    ]
    assert retold == []


def test_the_pass_outcomes_exit_as_the_table_says():
    table = exit_code_tables()[ROOT / "README.md"]
    for outcome, code in turn.PASS_EXIT_CODES.items():
        assert code in table, outcome
    for end, code in turn.WAIT_EXIT_CODES.items():
        assert code in table, end


def variables_named() -> set[str]:
    names: set[str] = set()
    for path in [*DOCS, *SHIPPED]:
        if path.is_file():
            names |= set(re.findall(rf"\b{ENV_PREFIX}[A-Z][A-Z_]*[A-Z]\b", text(path)))
    return names


def test_every_variable_the_docs_and_manifests_name_is_one_the_code_reads():
    known = {f"{ENV_PREFIX}{key.upper()}" for key in KEYS} | {CONFIG_FILE_ENV}
    named = variables_named()
    assert named, "the docs name some RECONCILER_ variables"
    assert named <= known, sorted(named - known)


def options_of(command: click.Command) -> set[str]:
    """A command's options; a group's, with its subcommands' (`manifests rbac`)."""
    own = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    subcommands = command.commands.values() if isinstance(command, click.Group) else ()
    return own.union(*map(options_of, subcommands))


GLOBAL = options_of(commands.cli)
COMMANDS = {name: options_of(c) | GLOBAL for name, c in commands.cli.commands.items()}
# `reconciler <command> ...` up to what ends a command line in prose or a table.
INVOCATION = re.compile(rf"\breconciler ({'|'.join(map(re.escape, COMMANDS))})\b([^`|\n#]*)")


def invocations() -> list[tuple[Path, str, str]]:
    found = []
    for path in [*DOCS, *SHIPPED]:
        if path.is_file():
            for m in INVOCATION.finditer(text(path)):
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", m[2]):
                    found.append((path, m[1], flag))
    return found


def test_every_flag_the_docs_give_a_command_is_one_it_takes():
    found = invocations()
    assert found, "the docs show some invocations with flags"
    wrong = [
        f"{path.relative_to(ROOT)}: reconciler {cmd} {flag}"
        for path, cmd, flag in found
        if flag not in COMMANDS[cmd]
    ]
    assert wrong == []


def default_of(name: str) -> float:
    """The code's default of a key, or of a flag named by its option."""
    if name == "--timeout":
        return commands.DEFAULT_WAIT_TIMEOUT
    key = name.removeprefix("--").replace("-", "_")
    return float(KEYS[key].default)


# "`progress_deadline` (600 s by default)", "`--timeout` defaults to 300 s".
STATED = re.compile(
    r"`(--?[a-z][a-z-]*|[a-z][a-z_]*)`\s*(?:\((\d+(?:\.\d+)?) ?s? by default\)|"
    r"defaults to (\d+(?:\.\d+)?))"
)


def stated_defaults() -> list[tuple[Path, str, float]]:
    found = []
    for doc in DOCS:
        flat = re.sub(r"\s+", " ", text(doc))
        for m in STATED.finditer(flat):
            found.append((doc, m[1], float(m[2] or m[3])))
    return found


def test_every_default_the_docs_state_is_the_code_s():
    stated = stated_defaults()
    assert len(stated) >= 3, stated
    wrong = [
        f"{doc.relative_to(ROOT)}: {name} is said to default to {value:g}, "
        f"the code's is {default_of(name):g}"
        for doc, name, value in stated
        if default_of(name) != value
    ]
    assert wrong == []


@pytest.mark.parametrize("flag", ["--qps", "--image"])
def test_a_key_without_a_flag_is_not_offered_as_one(flag: str):
    """The config keys a run rarely changes are keys only (config.py)."""
    assert all(flag not in options for options in COMMANDS.values())


# --- metrics, settings keys, make targets, health endpoints, runs, links ---

USER_DOCS = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    *(ROOT / "docs" / name for name in ("install.md", "operations.md", "pass.md")),
    *(ROOT / "docs" / name for name in ("reliability.md", "performance.md")),
]
ALL_DOCS = sorted({*DOCS, *USER_DOCS})
METRICS_SOURCE = ROOT / "reconciler" / "run" / "metrics.py"
# What a dashboard or a rule names besides the docs.
MONITORING = [
    *(ROOT / "config").rglob("*.yaml"),
    *(ROOT / "config").rglob("*.json"),
    *(ROOT / "dist" / "chart").rglob("*.yaml"),
]


def code_metrics() -> set[str]:
    """Every metric name reconciler/run/metrics.py registers."""
    return set(re.findall(r'"(reconciler_[a-z_]+)"', text(METRICS_SOURCE)))


def metrics_named(paths: list[Path]) -> dict[str, set[str]]:
    named: dict[str, set[str]] = {}
    for path in paths:
        if path.is_file():
            for name in re.findall(r"\breconciler_[a-z][a-z_]*[a-z]\b", text(path)):
                named.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return named


def unknown_metrics(named: dict[str, set[str]], known: set[str]) -> list[str]:
    """A histogram's series (_bucket, _sum, _count) and a counter's _created
    are the metric's own."""
    series = re.compile(r"_(?:bucket|sum|count|created)$")
    return sorted(
        f"{name} in {sorted(where)}"
        for name, where in named.items()
        if name not in known and series.sub("", name) not in known
    )


def test_every_metric_the_docs_and_dashboards_name_is_one_the_code_registers() -> None:
    known = code_metrics()
    assert len(known) >= 20, known
    named = metrics_named([*ALL_DOCS, *MONITORING])
    assert len(named) >= 15, "the docs name the metrics"
    assert unknown_metrics(named, known) == []


# A clause that speaks of settings: a key, a default, the config, a variable,
# or a key followed by its value.
KEY_CUE = re.compile(r"\b(?:keys?|settings?|config|defaults?)\b|RECONCILER_|`[a-z_]+` \(?\d")
# `leader_elect`, or `leader_elect: true`: the key is the word before the colon.
KEY_TOKEN = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)*)(?::[^`]*)?`")
# Names that are metrics (ours, the process's, Redis's, the cluster's), not keys.
METRIC_LIKE = re.compile(r"^(?:reconciler|process|redis|kube|apiserver)_|_(?:total|seconds|bytes)$")


def clauses(doc: str) -> list[str]:
    """A doc as clauses: paragraphs, list items and table cells, cut at the
    end of each sentence."""
    out = []
    for block in re.split(r"\n\s*\n|\n(?=\s*[-|*] )|\n(?=\s*\d+\. )", doc):
        flat = re.sub(r"\s+", " ", block)
        out.extend(re.split(r"(?<=[.;!?])\s+(?=[A-Z(`*\[])|\s\|\s", flat))
    return out


def keys_named(doc: str) -> list[str]:
    """The backticked words a clause about settings gives as keys: every
    snake_case word (a single word only when it is a key: `interval`, `qps`)."""
    found = []
    for clause in clauses(doc):
        if KEY_CUE.search(clause):
            for m in KEY_TOKEN.finditer(clause):
                word = m[1]
                if ("_" in word or word in KEYS) and not METRIC_LIKE.search(word):
                    found.append(word)
    return found


def test_every_settings_key_the_user_docs_name_is_a_key_of_the_code() -> None:
    named = {doc: keys_named(text(doc)) for doc in USER_DOCS}
    assert sum(map(len, named.values())) >= 20, named
    wrong = [
        f"{doc.relative_to(ROOT)}: `{key}` is not a key of reconciler.cli.settings.KEYS"
        for doc, keys in named.items()
        for key in keys
        if key not in KEYS
    ]
    assert wrong == []


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-zA-Z0-9][a-zA-Z0-9_-]*):", text(ROOT / "Makefile"), re.MULTILINE))


# `make install`, or a line of a code block: `make docker-build docker-push IMG=...`.
MAKE = re.compile(r"(?:`|^\s*(?:\$ |sudo )?)make((?: [a-z][a-z0-9-]*)+)", re.MULTILINE)


def make_targets_named(doc: str) -> set[str]:
    return {target for m in MAKE.finditer(doc) for target in m[1].split()}


def test_every_make_target_the_docs_name_is_in_the_makefile() -> None:
    targets = makefile_targets()
    assert {"install", "deploy", "run", "demo", "test"} <= targets
    named = {doc: make_targets_named(text(doc)) for doc in ALL_DOCS}
    assert sum(map(len, named.values())) >= 15, named
    wrong = [
        f"{doc.relative_to(ROOT)}: make {target}"
        for doc, found in named.items()
        for target in sorted(found - targets)
    ]
    assert wrong == []


# A path a probe or a scraper asks for: /healthz, /readyz, /livez, /health,
# /ready, /metrics (not /tmp or /etc).
ENDPOINT = re.compile(r"`(/(?:[a-z]+z|metrics|health[a-z]*|ready[a-z]*|live[a-z]*))`")


def served_paths() -> set[str]:
    return set(re.findall(r'self\.path == "(/[a-z]+)"', text(METRICS_SOURCE)))


def test_the_health_endpoints_the_docs_name_are_the_paths_the_daemon_serves() -> None:
    served = served_paths()
    assert served == {"/metrics", "/healthz", "/readyz"}, served
    named = {doc: set(ENDPOINT.findall(text(doc))) for doc in ALL_DOCS}
    assert {"/healthz", "/readyz"} <= set().union(*named.values())
    wrong = [
        f"{doc.relative_to(ROOT)}: {path}"
        for doc, paths in named.items()
        for path in sorted(paths - served)
    ]
    assert wrong == []


# "`interval` (30 s", "`qps` 50", "`max_retries` times (3)": a key and the
# value the doc gives it; not a list of values tried ("`--pace-budget` 0.25, 0.5").
KEY_VALUE = re.compile(
    r"`(--?[a-z][a-z-]*|[a-z][a-z_]*)`,? (?:[a-z]+ ){0,2}?\(?(\d+(?:\.\d+)?)(?: ?s)?"
    r"(?=[),;\s])(?!,? (?:and )?\d)"
)


def values_given(doc: str) -> list[tuple[str, float]]:
    flat = re.sub(r"\s+", " ", doc)
    found = []
    for m in KEY_VALUE.finditer(flat):
        key = m[1].removeprefix("--").replace("-", "_")
        if key in KEYS or m[1] == "--timeout":
            found.append((m[1], float(m[2])))
    return found


def test_every_value_the_docs_give_a_key_is_its_default() -> None:
    given = {doc: values_given(text(doc)) for doc in ALL_DOCS}
    assert sum(map(len, given.values())) >= 10, given
    wrong = [
        f"{doc.relative_to(ROOT)}: `{name}` {value:g}, the code's default is {default_of(name):g}"
        for doc, pairs in given.items()
        for name, value in pairs
        if default_of(name) != value
    ]
    assert wrong == []


RUN_ID = re.compile(r"\b(?:[a-z]+-)?20\d{6}T\d{6}Z\b")


def test_every_bench_run_a_doc_cites_is_in_bench_results() -> None:
    cited = {doc: set(RUN_ID.findall(text(doc))) for doc in ALL_DOCS}
    assert sum(map(len, cited.values())) >= 20
    missing = [
        f"{doc.relative_to(ROOT)}: {run}"
        for doc, runs in cited.items()
        for run in sorted(runs)
        if not (ROOT / "bench" / "results" / f"{run}.json").is_file()
    ]
    assert missing == []


def test_the_first_screen_of_performance_names_no_run() -> None:
    """Run ids go to the lab notes (docs/performance/)."""
    assert RUN_ID.findall(text(ROOT / "docs" / "performance.md")) == []


def anchors(doc: str) -> set[str]:
    """The anchors GitHub makes of a doc's headings."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", doc, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        out.add(slug)
    return out


LINK = re.compile(r"\]\(([^)#\s]*\.md)?#([^)\s]+)\)")


def test_every_link_to_a_section_of_a_doc_finds_it() -> None:
    wrong = []
    links = [(doc, m) for doc in ALL_DOCS for m in LINK.finditer(text(doc))]
    assert len(links) >= 20
    for doc, m in links:
        target = (doc.parent / m[1]).resolve() if m[1] else doc
        if target.is_file() and m[2] not in anchors(text(target)):
            wrong.append(f"{doc.relative_to(ROOT)}: {m[1] or ''}#{m[2]}")
    assert wrong == []


def test_the_readme_is_one_screen() -> None:
    assert len(text(ROOT / "README.md").splitlines()) <= 200


def test_check_exits_as_the_table_says_on_a_bad_config_and_on_bad_usage(tmp_path: Path) -> None:
    """`check` reports a bad config as a failed check (1), not as bad usage (2):
    the table and check's --help say so, and it does."""
    from click.testing import CliRunner

    table = exit_code_tables()[ROOT / "README.md"]
    assert "`check`: some check failed, a bad config among them" in table[turn.EXIT_FAILED]
    assert "(but for `check`) bad config" in table[turn.EXIT_USAGE]
    bad = tmp_path / "reconciler.yaml"
    bad.write_text("intervl: 3\n")
    runner = CliRunner()
    assert runner.invoke(commands.cli, ["check", "--config", str(bad)]).exit_code == 1
    assert runner.invoke(commands.cli, ["check", "--bogus"]).exit_code == turn.EXIT_USAGE
    helped = runner.invoke(commands.cli, ["check", "--help"]).output
    usage = next(line for line in helped.splitlines() if line.strip().startswith("2 "))
    failed = next(line for line in helped.splitlines() if line.strip().startswith("1 "))
    assert "config" not in usage and "bad config" in failed


# `kubectl delete pvc -n NS -l a=b,c=d` and `kubectl delete pvc -n NS data-r-3`.
DELETE_CLAIMS = re.compile(r"kubectl delete pvc -n NS (?:-l (\S+?)|(\S+?))`")


def test_pass_md_removes_kept_claims_by_the_labels_and_names_the_code_gives_them() -> None:
    from reconciler.kinds.redis.identity import from_api, owner_of, pod_name
    from reconciler.kinds.redis.storage import Storage, claim_manifest, claim_name

    def claim_of(name: str, index: int) -> dict[str, Any]:
        meta = {"name": name, "namespace": "NS", "uid": f"uid-{name}"}
        redis = from_api(
            {
                "apiVersion": "myapp.demo.kubebuilder.io/v1",
                "kind": "Redis",
                "metadata": meta,
                "spec": {},
            }
        )
        pod = pod_name(redis, index)
        return claim_manifest(owner_of(redis), Storage("1Gi", 2**30), claim_name(pod))

    made, other = claim_of("r", 3), claim_of("s", 3)
    found = DELETE_CLAIMS.findall(re.sub(r"\s+", " ", text(ROOT / "docs" / "pass.md")))
    selectors = [s for s, _ in found if s]
    names = [n for _, n in found if n]
    assert len(selectors) == 1 and names == [made["metadata"]["name"]], found
    wanted = dict(pair.split("=", 1) for pair in selectors[0].split(","))
    assert wanted.items() <= made["metadata"]["labels"].items()
    assert not wanted.items() <= other["metadata"]["labels"].items(), "another Redis's claims"


def sh_blocks(doc: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", doc, re.S)


def outside_heredocs(block: str) -> list[str]:
    """The lines of a shell block that are commands: a here-document's
    lines are its command's standard input, not any command's arguments."""
    lines, end = [], None
    for line in block.splitlines():
        if end is not None:
            end = None if line == end else end
            continue
        lines.append(line)
        opened = re.search(r"<<-?\s*'?(\w+)'?", line)
        end = opened.group(1) if opened else None
    return lines


def test_the_credential_recipe_puts_the_token_on_no_command_line() -> None:
    """Any user of a bastion reads every command's arguments (`ps`) while it
    runs: the token goes into the kubeconfig on a command's standard input."""
    (recipe,) = [b for b in sh_blocks(text(ROOT / "docs/install.md")) if "create token" in b]
    assert "token=$(kubectl create token reconciler" in recipe
    exposed = [line for line in outside_heredocs(recipe) if re.search(r"\$\{?token\b", line)]
    assert exposed == []
    assert 'token: "$token"' in recipe  # in the here-document
