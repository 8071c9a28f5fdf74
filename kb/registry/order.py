"""The order of versions: the one reading of a version kb.registry compares, sorts and matches by.

Apart from kb.registry.versions (which reads the user's versions from text and compiles many patterns) so that
loading the registry, which sorts every package's releases, imports only ``packaging.version``.
"""

from __future__ import annotations

import functools

from packaging.version import InvalidVersion, Version


@functools.lru_cache(maxsize=1024)
def version_key(version: str) -> Version:
    """The one reading of a version that kb.registry compares, sorts and matches by (the registry's releases,
    the user's versions, the registry builders' releases): packaging's PEP 440 ``Version`` of the public part,
    so "2.4.0+cu121" is 2.4.0, "4.47.0.dev0" comes before 4.47.0 and "0.9" before "0.14". Text packaging
    cannot read raises ``InvalidVersion`` (a ValueError) naming it: no order is guessed for it."""
    try:
        return Version(version.split("+", 1)[0])
    except InvalidVersion:
        raise InvalidVersion(f"{version!r} is not a version (PEP 440, as the packaging library reads it)") from None


def same_release(version: str, release: str) -> bool:
    """``release`` is the one ``version`` names: the same version (local labels aside), or one of the series a
    partial version names ("4.46" and "4.46.3"); "4.47.0.dev0" is not 4.47.0."""
    v, r = version_key(version), version_key(release)
    same_kind = (v.epoch, v.pre, v.post, v.dev) == (r.epoch, r.pre, r.post, r.dev)
    return same_kind and r.release[: len(v.release)] == v.release
