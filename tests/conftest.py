"""Hypothesis profiles: the default explores widely; `make mutate` runs the
unit tests once per mutant, so it asks for fewer examples (HYPOTHESIS_PROFILE=mutate)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "mutate",
    max_examples=60,
    derandomize=True,  # the same examples for every mutant: a repeatable score
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
