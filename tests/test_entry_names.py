"""Every name an answer shows is real: ``kb factcheck`` over each shipped entry, rendered the way ``kb ask``
renders it (markdown, English and Chinese), finds no name that does not exist, except the names the
entry's own myths are about (a myth quotes the wrong name on purpose).

And the other half of issue 12's deliverable: every code-like name in an entry's shown text is linked
(CHK011), so the answer's verified names include the one that matters.
"""

import pytest

from kb.ask.result import entry_result
from kb.content.check import entry_links, shown_names
from kb.content.entries import load_entries
from kb.contract import to_dict
from kb.present import markdown
from kb.registry.factcheck import check_names
from tests.conftest import ENTRIES

LOADED = load_entries(ENTRIES, include_withdrawn=True)
IDS = [le.entry.id for le in LOADED]


def _myth_names(le) -> set[str]:
    return {mn.name for m in le.entry.myths for mn in m.names}


@pytest.mark.slow  # every shipped entry, rendered in both languages and factchecked (about 10 s)
@pytest.mark.parametrize("le", LOADED, ids=IDS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rendered_entry_names_exist(registry, le, lang):
    e = le.entry.model_dump(mode="json")
    text = markdown.entry(to_dict(entry_result(e, lang, registry)), lang)
    assert le.entry.title.get(lang) in text  # the rendering is the entry's own text
    myths = _myth_names(le)
    bad = [
        f"{v.name} (line {v.line}: {text.splitlines()[v.line - 1].strip()[:100]})"
        for v in check_names(text, registry, lang)
        if v.verdict == "does-not-exist" and v.name not in myths and v.name.rsplit(".", 1)[-1] not in myths
    ]
    assert not bad, f"{le.path.name} ({lang}): names that do not exist: {bad}"


@pytest.mark.slow  # every shipped entry (kb check's CHK011 over all of them)
@pytest.mark.parametrize("le", LOADED, ids=IDS)
def test_every_shown_name_is_linked(registry, le):
    """CHK011 finds nothing in any shipped entry: every code-like name it shows is a listed registry id, a myth
    name or an external name with a source (there is no list of tolerated names any more)."""
    unlinked = {lk.name.name: ".".join(map(str, lk.name.loc)) for lk in entry_links(le.entry, registry)}
    assert not unlinked, f"{le.path.name}: unlinked names (kb check --fix proposes the links): {unlinked}"


def test_no_debt_list_is_shipped():
    """The debt list of tolerated unlinked names is gone; nothing may bring it back."""
    assert not (ENTRIES.parent / "unlinked-names.json").exists()


def test_the_issue_example_is_found(registry):
    """The case the issue names: synced_gpus in a fix's text is a name the answer must link."""
    le = next(x for x in LOADED if x.entry.id == "generate-hang-zero3-multi-gpu")
    found = {sn.name for sn in shown_names(le.entry) if sn.loc[:2] == ("fixes", 0)}
    assert "synced_gpus" in found
    fix0 = le.entry.fixes[0].params + le.entry.params
    assert "transformers:GenerationMixin.generate.synced_gpus" in fix0
