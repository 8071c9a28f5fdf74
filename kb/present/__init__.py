"""Presenters: pure functions from the answer contract (kb.contract, docs/answer.md) to text or payloads.

What an answer shows, and in which order, is decided once in ``kb.present.doc`` (answer -> blocks; also
the lint, mem, show and factcheck reports -> blocks, for chat surfaces: ``doc.report_blocks``); each
presenter only draws blocks. Labels come from ``kb.present.labels`` in both languages.

| name       | module                    | for                                                      |
|------------|---------------------------|----------------------------------------------------------|
| terminal   | kb.present.terminal       | `kb ask` / `kb show` on a TTY (rich colour, soft wrap)   |
| plain      | kb.present.plain          | piped output: no colour, no hard wrap                    |
| markdown   | kb.present.markdown       | `--format markdown`; the base of the chat renderers      |
| reports    | kb.present.reports        | the text of lint, factcheck, mem, gaps, eval, stats ...  |

Chat surfaces draw the same blocks through bot/layout.py (Discord embeds, Slack Block Kit, each within its
platform's limits); the static site (sitegen/) renders Results with its own templates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb.present import markdown, plain

if TYPE_CHECKING:
    from kb.contract import ShowReport

FORMATS = ("terminal", "plain", "markdown")


def render_answer(answer: Any, fmt: str, site_url: str = "", long: bool = False, all_fronts: bool = False) -> str:
    """Render an Answer (or its dict) in one of FORMATS; with ``site_url``, each result links its site page.
    Short by default (kb.present.doc.short_result_blocks); ``long``: everything in every result."""
    if fmt == "terminal":
        from kb.present import terminal

        return terminal.answer(answer, site_url, long=long, all_fronts=all_fronts)
    table: dict[str, Callable[..., str]] = {"plain": plain.answer, "markdown": markdown.answer}
    return table[fmt](answer, site_url, long, all_fronts)


def render_entry(result: dict[str, Any], lang: str, fmt: str, site_url: str = "") -> str:
    """One entry's Result (a dict) in one of FORMATS."""
    if fmt == "terminal":
        from kb.present import terminal

        return terminal.entry(result, lang, site_url)
    return {"plain": plain.entry, "markdown": markdown.entry}[fmt](result, lang, site_url)


def render_show(report: ShowReport, fmt: str, site_url: str = "") -> str:
    """``kb show``: a ShowReport in one of FORMATS, laid out as ``kb ask`` lays out a result (kb.present.doc)."""
    from kb.contract import to_dict

    return render_entry(to_dict(report.result), report.lang, fmt, site_url)
