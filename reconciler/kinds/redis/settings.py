"""The Redis kind's own settings. They are keys of the config file and
``RECONCILER_<KEY>`` variables like the application's (`cli/settings` reads
them from `Kind.settings`), but only this folder names them."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.kinds.base import PlanInput, settings_of


@dataclass(frozen=True)
class RedisSettings:
    # The image of the pods of a Redis whose spec.image is empty.
    image: str = "redis:5-alpine"
    # Seconds a Redis may go with pods not Ready and none of them moving
    # before Progressing turns False/ProgressDeadlineExceeded (as a
    # Deployment's progressDeadlineSeconds).
    # The image repositories a Redis's spec.image and spec.exporter.image
    # may come from (kinds/redis/images.py says how an entry matches); empty
    # allows any, which `reconciler check` warns of.
    allowed_images: tuple[str, ...] = ()
    progress_deadline: float = field(
        default=600.0,
        metadata={
            "positive": True,
            "flag": "Seconds a Redis may wait on pods that do not move before it is "
            "flagged ProgressDeadlineExceeded.",
        },
    )


DEFAULTS = RedisSettings()


def redis_settings(inp: PlanInput) -> RedisSettings:
    """The settings a Redis is planned with: found by the engine once a pass
    (`PlanInput.settings`), else read from the input's config."""
    found = inp.settings
    return found if isinstance(found, RedisSettings) else settings_of(inp.config, DEFAULTS)
