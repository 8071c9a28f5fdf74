"""The static site (`kb export`): entries and registry as HTML pages in English and Chinese, with Pagefind search.

``build_site(out, ...)`` renders, writes and indexes the site and returns ``export_report(...)``;
``report_text`` is its plain-text form; ``sitegen.serve`` previews a built site on 127.0.0.1. docs/site.md
describes the pages, the search design and how to host the result.
"""

from sitegen.build import build_site, export_report, index_site, render, report_text
from sitegen.labels import SITE_LABELS, labels
from sitegen.model import LANGS, SiteError, build_model

__all__ = [
    "LANGS",
    "SITE_LABELS",
    "SiteError",
    "build_model",
    "build_site",
    "export_report",
    "index_site",
    "labels",
    "render",
    "report_text",
]
