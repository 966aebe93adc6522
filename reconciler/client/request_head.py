"""What goes into the head of a request, made one way and checked: the path
of a collection or of one object, each name in it a name (`path_of`); the
request target with its query (`request_target`); and a header value that
cannot end its line (`header_value_ok`). A name from an object (an owner
reference's, which the apiserver never checked) goes in only if it is one;
anything else is refused before a byte is sent (BadRequestTarget)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from reconciler.client.errors import BadRequestTarget
from reconciler.model import ResourceType
from reconciler.untrusted import shown

# What a request line and a header value may hold: visible ASCII (and, in a
# header value, spaces and tabs). No control character: a CR or LF would end
# the line and start another request of the sender's choosing; no byte past
# ASCII: a proxy may read it otherwise than the apiserver does.
_TARGET = re.compile(r"/[!-~]*")
_FIELD_VALUE = re.compile(r"[\t -~]*")


# A name, namespace or subresource as it may go into a path: what any kind
# of object may be named (a DNS subdomain, and a few built-in kinds' looser
# names: capitals, "_", ":"), 1 to 253 characters, beginning and ending with
# a letter or digit. So never "." or ".." (which a proxy normalising the path
# would walk up by), "/", "?", "#", "%", a space or a control character. Its
# characters are all unreserved or ":" (RFC 3986 pchar): it is its own
# percent-encoding, so a name that passes goes in as it is.
_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.:]{0,251}[A-Za-z0-9])?")


def path_of(
    res: ResourceType, namespace: str | None, name: str | None = None, sub: str = ""
) -> str:
    """The path of ``res``'s collection (``name`` None) or of one object.
    Each name, namespace and subresource is checked to be a name
    (`segment`), or the request is refused unsent (BadRequestTarget): an
    owner reference's name is anyone's text, and the apiserver never
    checked it."""
    name_ok = _NAME.fullmatch  # once per request: no call but the match itself
    if namespace:
        if name_ok(namespace) is None:
            segment(res, namespace, name, namespace)
        base = f"{res.path_prefix}/namespaces/{namespace}/{res.plural}"
    else:
        base = f"{res.path_prefix}/{res.plural}"
    if name is not None:
        if name_ok(name) is None:
            segment(res, namespace, name, name)
        base = f"{base}/{name}"
    if sub:
        if name_ok(sub) is None:
            segment(res, namespace, name, sub)
        base = f"{base}/{sub}"
    return base


def segment(res: ResourceType, namespace: str | None, name: str | None, value: str) -> str:
    """``value`` (a name, namespace or subresource of a request for ``res``)
    if it may go into a path as it is; else BadRequestTarget naming the object."""
    if _NAME.fullmatch(value) is None:
        what = f"{res.kind} {shown(namespace or '')}/{shown(name or '')}"
        raise BadRequestTarget(what, f"{shown(value)} is not a name")
    return value


def request_target(path: str, params: Mapping[str, Any] | None) -> str:
    """The one way a request target (path and query) is made: the query
    percent-encoded (urlencode: a control character, a space, a byte past
    ASCII are all escaped), and the whole checked to be visible ASCII, so a
    path not made by `path_of` cannot carry a second request either."""
    target = f"{path}?{urlencode(params)}" if params else path
    if _TARGET.fullmatch(target) is None:
        raise BadRequestTarget(f"request {shown(target)}", "not a request target")
    return target


def header_value_ok(value: str) -> bool:
    """Whether ``value`` may be sent as a header's value: it cannot end the
    line, nor be read otherwise by a proxy."""
    return _FIELD_VALUE.fullmatch(value) is not None
