"""Who a fix binds, and the name of the binding: valid, and never one two
subjects share."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.checks.grants import (
    GROUP,
    SERVICE_ACCOUNT,
    SHIPPED,
    USER,
    Subject,
    binding_name,
    service_account,
    subject_of,
)

# What the apiserver takes as an RBAC object's name (a path segment), and
# what we hold ours to: lower case, [a-z0-9.:-].
VALID = re.compile(r"[a-z0-9.:-]{1,253}")


def test_a_service_account_user_is_bound_as_the_service_account():
    assert subject_of("system:serviceaccount:ops:bastion") == Subject(
        SERVICE_ACCOUNT, "bastion", "ops"
    )
    assert subject_of("alice@example.com") == Subject(USER, "alice@example.com")


def test_the_shipped_service_account_keeps_the_shipped_names():
    assert binding_name("reconciler", SHIPPED) == "reconciler"
    assert binding_name("reconciler", service_account("ops:bastion")) == "reconciler:sa:ops:bastion"


@pytest.mark.parametrize("value", ["ops", ":x", "ops:", ""])
def test_a_service_account_is_namespace_colon_name(value: str):
    with pytest.raises(ValueError, match="NAMESPACE:NAME"):
        service_account(value)


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=300))
def test_any_two_users_get_valid_names_of_their_own(one: str, other: str):
    a, b = (
        binding_name("reconciler", Subject(USER, one)),
        binding_name("reconciler", Subject(USER, other)),
    )
    assert VALID.fullmatch(a) and VALID.fullmatch(b)
    assert (a == b) == (one == other)


def test_a_long_name_is_cut_and_told_apart_by_its_hash():
    long = "a" * 300
    name = binding_name("reconciler", Subject(USER, long))
    assert VALID.fullmatch(name)
    assert name != binding_name("reconciler", Subject(USER, long + "b"))


def test_a_user_a_group_and_a_service_account_of_like_names_get_three_bindings():
    names = {
        binding_name("reconciler", Subject(USER, "ops:bastion")),
        binding_name("reconciler", Subject(GROUP, "ops:bastion")),
        binding_name("reconciler", service_account("ops:bastion")),
        binding_name("reconciler", Subject(USER, "Ops:Bastion")),
    }
    assert len(names) == 4


def test_the_flag_is_quoted_for_a_shell():
    assert Subject(USER, "a b").flag == "--user 'a b'"
    assert service_account("ops:bastion").flag == "--serviceaccount ops:bastion"
