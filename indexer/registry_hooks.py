"""Extra record providers for ``kb registry build``: one table, one module per concern.

Each provider is ``fn(pkg: str, version: str) -> list[dict]`` and returns records (built with
``indexer.registry_build._record``) for the package being built, or ``[]``. ``build_registry`` calls
every provider of ``PROVIDERS`` after the package's own builder; a provider that fails on an older
release records nothing and says so on stderr (it never breaks the build).
"""

from __future__ import annotations

from collections.abc import Callable

Provider = Callable[[str, str], list[dict]]

PROVIDERS: list[tuple[str, str]] = [
    # (module, function): imported lazily so a missing optional module never breaks the build
    ("indexer.registry_extra", "extra_records"),  # env vars, torchrun flags, forwarded methods, scripts
    ("indexer.registry_frontends", "frontend_records"),  # front-end mappings (accelerate / HF -> ds_config)
    ("indexer.registry_sites", "site_records"),  # raise / warn sites on the config paths
]
