"""Lint one file in its own dialect at its own releases: detect the front end, decide the versions, run the rules.

``kb lint``, ``kb ask`` with a config and the bots call ``lint_file``: it detects the dialect (kb.doctor.dialect),
takes the user's versions or assumes those the front end requires (each with its reason), and lints with the
registry as those releases have it. The versions go into the report, so the user sees what was assumed.

Core module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kb.doctor.configs import ParsedConfig
from kb.doctor.dialect import AssumedVersion, assumed_versions, detect, view_for
from kb.doctor.lint import Finding, lint_config
from kb.memory.card import DEFAULT_GPU_MEM_GIB
from kb.registry.store import Registry


@dataclass
class Judged:
    findings: list[Finding]
    kind: str  # the dialect when one was detected, else the config's kind
    versions: list[AssumedVersion] = field(default_factory=list)
    registry: Registry | None = None  # the view the file was linted with


def lint_file(
    cfg: ParsedConfig,
    registry: Registry,
    given: dict[str, str] | None = None,
    world_size: int | None = None,
    model_params: float | None = None,
    gpu_mem_gib: float | None = None,
) -> Judged:
    """Findings for one parsed file, with the dialect and the releases it was judged at."""
    base = registry._default_view()
    given = dict(given or {})
    if cfg.dialect is None:
        cfg.dialect = detect(cfg.kind, cfg.data, base)
    versions = assumed_versions(cfg.dialect or cfg.kind, base, given)
    view = view_for(base, versions) if versions else base.at(given)
    findings = lint_config(
        cfg,
        view,
        world_size=world_size,
        model_params=model_params,
        gpu_mem_gib=DEFAULT_GPU_MEM_GIB if gpu_mem_gib is None else gpu_mem_gib,
    )
    return Judged(findings, cfg.dialect or cfg.kind, versions, view)
