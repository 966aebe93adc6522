"""Which images a Redis may run: the repositories of the setting
``allowed_images``.

Whoever may create a Redis names the images its pods run, the server's
(``spec.image``) and the exporter's (``spec.exporter.image``), and both
containers get the password from the Secret the Redis names. Without a
list, creating a Redis is creating a pod of any image; with one, an image
from elsewhere makes the Redis Degraded (``ImageNotAllowed``) and no pod of
it is made or replaced.

An entry names a repository, matched whatever the tag or digest; an entry
that ends with ``/`` takes every repository under it. Both sides are read
as a container runtime reads them: ``redis`` is
``docker.io/library/redis``, ``team/app`` is ``docker.io/team/app``.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.kinds.redis.spec import RedisSpec

SETTING = "allowed_images"
REASON = "ImageNotAllowed"
_HUB = "docker.io"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


def repository(image: str) -> str:
    """The repository of an image reference, without its tag and digest,
    with the registry a runtime would pull it from."""
    name = image.partition("@")[0]
    head, slash, last = name.rpartition("/")
    name = f"{head}{slash}{last.partition(':')[0]}"
    return _with_registry(name)


def _with_registry(name: str) -> str:
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return f"{_HUB}/{rest}" if first in _HUB_ALIASES else name
    return f"{_HUB}/{name}" if slash else f"{_HUB}/library/{name}"


def _prefix(entry: str) -> str:
    """What the repositories under an entry that ends with ``/`` start with."""
    stripped = entry.rstrip("/")
    first, _, rest = stripped.partition("/")
    if "." in first or ":" in first or first == "localhost":
        registry = _HUB if first in _HUB_ALIASES else first
        return f"{registry}/{rest}/" if rest else f"{registry}/"
    return f"{_HUB}/{stripped}/"


def allowed(image: str, entries: Sequence[str]) -> bool:
    """``image`` comes from a repository that ``entries`` lists; every image
    does when the list is empty."""
    if not entries:
        return True
    found = repository(image)
    for entry in entries:
        if entry.endswith("/"):
            if found.startswith(_prefix(entry)):
                return True
        elif found == _with_registry(entry):
            return True
    return False


def refused(spec: RedisSpec, entries: Sequence[str]) -> list[str]:
    """A line for each image of ``spec`` that the list does not allow."""
    images = [("spec.image", spec.image)]
    if spec.server.exporter is not None:
        images.append(("spec.exporter.image", spec.server.exporter.image))
    return [
        f"{path}: {image} is not from a repository the setting {SETTING} lists "
        f"({', '.join(entries)})"
        for path, image in images
        if not allowed(image, entries)
    ]
