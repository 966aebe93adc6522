"""What a value written by someone else must be before it goes anywhere.

An object's author, or whoever may create a pod where we reconcile, writes
names we later put into request lines, event messages and log lines. The
apiserver checks an object's own name, but not the names inside its
``ownerReferences``; so every such name is checked here before it is asked
for, and every such text is quoted and cut short here before a message
shows it (a text log line escapes what is left: `cli/logs.py`).
"""

from __future__ import annotations

import re

# The apiserver's rule for the name of a custom resource (and most kinds):
# a DNS subdomain, RFC 1123, at most 253 characters.
DNS_SUBDOMAIN_MAX = 253
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def dns_subdomain(name: str) -> bool:
    """A name the apiserver would take for an object of a custom resource."""
    return 0 < len(name) <= DNS_SUBDOMAIN_MAX and _DNS_SUBDOMAIN.fullmatch(name) is not None


def shown(value: str, most: int = 80) -> str:
    """A value someone else wrote, for a message: quoted, escaped, and cut
    short (a name in a reference can be as long as the object allows)."""
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}... ({len(value)} characters)"
