"""spec.config's grammar: the planner's check (code, for its messages) and
the CRD's (RE2 patterns) accept exactly the same directives."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import find, given, settings
from hypothesis import strategies as st

from reconciler.kinds.redis import directives

_PIECES = [
    *"aZ1 -$()\"'#\\\t\r\n\x00\x7f,.;[]~",
    "--",
    "$(",
    "$$",
    '""',
    "\u00a0",
    "\u212a",
    "\u2028",
    "\u00e9",
    "PORT",
    "Dir",
    "include",
]
_NAMES = [*sorted(directives.ALLOWED), *sorted(directives.REFUSED), "MAXMEMORY", "portable"]
anything = st.builds(
    lambda lead, name, rest: lead + name + rest,
    st.sampled_from(["", " ", "  ", "\t"]),
    st.sampled_from(_NAMES),
    st.lists(st.sampled_from(_PIECES), max_size=10).map("".join),
)
# Mostly the grammar's own words, a few characters from its edges: about
# half of these are accepted, so both answers are exercised.
_NEAR = [*"a1-$)(%~ ", '""', "#", "--"]
near = st.builds(
    lambda name, words: f"{name} {' '.join(words)}",
    st.sampled_from(_NAMES),
    st.lists(st.lists(st.sampled_from(_NEAR), min_size=1, max_size=4).map("".join), max_size=4),
)
directive_texts = st.one_of(anything, near)


def _re2(pattern: str) -> re.Pattern[str]:
    """An RE2 pattern in Python: RE2's ``$`` is the end of the text, Python's
    also matches before a final newline."""
    return re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern))


@settings(max_examples=800)
@given(directive_texts)
def test_the_crd_grammar_accepts_what_the_planner_accepts(text):
    assert (directives.error(text) is None) == bool(_re2(directives.GRAMMAR).match(text))


@settings(max_examples=400)
@given(directive_texts)
def test_a_refused_name_is_said_by_its_own_rule_in_both(text):
    said = directives.error(text) or ""
    for name in directives.REFUSED:
        caught = bool(_re2(directives.refused_pattern(name)).match(text))
        assert caught == said.startswith(f"directive {name} {directives.REFUSED[name]}")
    any_refused = bool(_re2(directives.ANY_REFUSED).match(text))
    assert any_refused == any(said.endswith(why) for why in directives.REFUSED.values())


@settings(max_examples=800)
@given(directive_texts)
def test_the_crd_admits_what_the_planner_accepts(text):
    """The item's pattern, and no refused name's rule."""
    admitted = bool(_re2(directives.PATTERN).match(text)) and not any(
        _re2(directives.refused_pattern(n)).match(text) for n in directives.REFUSED
    )
    assert admitted == (directives.error(text) is None)


def test_both_answers_are_drawn():
    """Else the parity above could hold by never drawing an accepted one.
    Each condition holds for a good share of the draws (a rarer one, tried
    on a fresh clone without hypothesis's database, found no example)."""
    accepted = find(near, lambda d: directives.error(d) is None and "$" in d)
    assert re.fullmatch(directives.GRAMMAR, accepted)
    refused = find(near, lambda d: directives.error(d) is not None and " --" in d)
    assert not re.fullmatch(directives.GRAMMAR, refused)
    assert directives.error('save ""') is None and directives.error("hz a$b") is None


def test_names_fold_in_ascii_alone():
    """redis-server folds a name's ASCII case, not the Kelvin sign."""
    assert directives.error("TCP-KEEPALIVE 60") is not None  # written lowercase, as redis.conf
    assert directives.error("Port 1") == "directive port is set by spec.port, not spec.config"
    assert _re2(directives.refused_pattern("bind")).match("BiNd 1")
    assert not _re2(directives.refused_pattern("timeout")).match("\u212atimeout 1")


def test_no_refused_name_is_allowed_and_every_allowed_name_is_plain():
    assert not directives.ALLOWED & set(directives.REFUSED)
    assert all(re.fullmatch(r"[a-z][a-z-]*[a-z]", n) for n in directives.ALLOWED)


def test_the_words_reach_the_server_as_written():
    assert directives.arguments(("save", '""')) == ["--save", ""]
    assert directives.arguments(("notify-keyspace-events", "KEA$")) == [
        "--notify-keyspace-events",
        "KEA$",
    ]
    assert directives.split("  hz   10 ") == ["hz", "10"]


def test_docs_pass_md_lists_the_allow_list_and_each_refusal_with_why():
    docs = (Path(__file__).resolve().parents[4] / "docs" / "pass.md").read_text()
    listed = docs[docs.index("- **the name** is one of these") : docs.index("They change neither")]
    assert set(re.findall(r"`([a-z-]+)`", listed)) == directives.ALLOWED
    for name, why in directives.REFUSED.items():
        assert f"- `{name}` {why}" in docs
