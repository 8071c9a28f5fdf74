"""The static site (`kb export`, sitegen/): what it contains, that it is deterministic and self-contained.

No browser here (tests/test_site_browser.py drives Chromium): the site is built once into a temporary folder,
with Pagefind, and its files are read back.
"""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
import yaml
from click.testing import CliRunner

from kb.content.entries import AREAS, load_entries
from kb.present.labels import LABELS
from sitegen import SITE_LABELS, SiteError, build_site, labels, report_text
from sitegen.build import NOT_NAMES, code_url, record_source, root_of
from sitegen.canon import SIGNATURE, cbor_decode, cbor_encode, pf_bytes, read_pf
from sitegen.model import CLAIM_VERDICTS, NAME_VERDICTS, RESERVED, record_slugs
from tests.conftest import ENTRIES, ROOT

BASE = "https://example.org/kb/"
SEED_NAMES = (
    "zero_force_opt_offload",
    "zero_3_leaf_modules",
    "zero_force_ds_cpu_offload",
    "cpu_offload_use_pin_memory",
)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "out"
    build_site(out, base_url=BASE)
    return out


@pytest.fixture(scope="module")
def loaded():
    return load_entries(ENTRIES, include_withdrawn=True)


def _html_files(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("pagefind-"))


def _read(site: Path, path: str) -> str:
    return (site / path.strip("/") / "index.html").read_text(encoding="utf-8")


class Page(HTMLParser):
    """Tags, attributes, ids and text of one page, and whether every element that opens also closes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.label_text: list[str] = []  # text the site writes around the entries': headings, table heads, badges
        self._skip = 0
        self._label: list[bool] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            if a["id"] in self.ids:
                self.errors.append(f"duplicate id {a['id']}")
            self.ids.add(a["id"])
        if tag in ("script", "style"):
            self._skip += 1
        if tag not in VOID:
            self.stack.append(tag)
            cls = a.get("class") or ""
            self._label.append(
                tag in ("h2", "th", "nav", "button", "legend", "footer") or "badge" in cls or "label" in cls
            )

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else '-'}> (line {self.getpos()[0]})")
            if tag in self.stack:
                while self.stack and self.stack.pop() != tag:
                    self._label.pop()
                self._label.pop()
            return
        self.stack.pop()
        self._label.pop()

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            if any(self._label):
                self.label_text.append(data)

    def links(self) -> list[str]:
        return [a["href"] for t, a in self.tags if t == "a" and a.get("href")]


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    p.close()
    return p


# ---------------------------------------------------------------- determinism and layout


@pytest.mark.slow  # a second full build
def test_two_builds_are_byte_identical(site, tmp_path):
    again = tmp_path / "again"
    build_site(again, base_url=BASE)
    a = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    b = sorted(p.relative_to(again).as_posix() for p in again.rglob("*") if p.is_file())
    assert a == b
    differ = [rel for rel in a if (site / rel).read_bytes() != (again / rel).read_bytes()]
    assert not differ, differ[:10]


def test_search_bundles_and_assets(site):
    for lang in ("en", "zh"):
        entry = json.loads((site / f"pagefind-{lang}" / "pagefind-entry.json").read_text())
        ((code, info),) = entry["languages"].items()
        assert code == ("en" if lang == "en" else "zh-cn")
        assert (site / f"pagefind-{lang}" / f"pagefind.{info['hash']}.pf_meta").is_file()
        assert (site / f"pagefind-{lang}" / "pagefind.js").is_file()
    vocab = json.loads((site / "static" / "zh-words.json").read_text(encoding="utf-8"))
    assert {"显存", "第一"} <= set(vocab["words"]) and vocab["words"] == sorted(vocab["words"])
    assert (site / "static" / "site.css").is_file() and (site / "static" / "site.js").is_file()


def test_every_entry_has_both_pages_with_a_switch(site, loaded):
    assert len(loaded) > 50
    for le in loaded:
        eid = le.entry.id
        for lang, other, html_lang in (("en", "zh", "en"), ("zh", "en", "zh-CN")):
            page = parse(site / lang / eid / "index.html")
            assert not page.errors, (lang, eid, page.errors)
            html = dict(page.tags[0][1]) if page.tags[0][0] == "html" else {}
            assert html.get("lang") == html_lang
            switch = [a for t, a in page.tags if t == "a" and "data-switch" in a]
            assert [a["href"] for a in switch] == [f"../../{other}/{eid}/"], (lang, eid)
            title = le.entry.title.zh if lang == "zh" else le.entry.title.en
            assert title in "".join(page.text)


def test_entry_page_shows_what_an_answer_shows(site, loaded, registry):
    from kb.ask.result import entry_result
    from kb.contract import to_dict

    le = next(x for x in loaded if x.entry.id == "zero3-single-gpu-no-offload")
    for lang in ("en", "zh"):
        r = to_dict(entry_result(le.entry.model_dump(mode="json"), lang, registry))
        html = _read(site, r["path"])
        page = parse(site / r["path"].strip("/") / "index.html")
        text = "".join(page.text)
        for s in le.entry.symptoms.zh if lang == "zh" else le.entry.symptoms.en:
            assert s in text
        assert r["summary"] in text and all(c in text for c in r["causes"])
        for f in r["fixes"]:
            assert f["title"] in text and f["text"] in text
            if f["snippet"]:
                code = f["snippet"]["code"].rstrip("\n")
                assert f'<pre><code class="language-{f["snippet"]["lang"]}">' in html
                assert code.replace('"', "&#34;") in html or code in text
        for m in r["myths"]:
            assert m["claim"] in text and m["correction"] in text
        for pkg, spec in r["applies_to"].items():
            assert f"{pkg} {spec}" in text
        lb = labels(lang)
        for key in ("symptoms", "cause", "fixes", "params", "myths", "applies", "sources"):
            assert lb[key] in text, key
        hrefs = page.links()
        assert (
            "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage3.py#L4016-L4050"
            in hrefs
        )
        assert "https://huggingface.co/docs/transformers/deepspeed" in hrefs


def test_entry_page_carries_the_search_weights(site, loaded):
    """What users search with is weighted (title, symptoms, error messages), names and numbers are not; the
    section headings the site writes are not indexed; the error messages are the signatures' examples."""
    from sitegen.build import WEIGHTS

    le = next(x for x in loaded if x.entry.id == "zero3-single-gpu-no-offload")
    for lang in ("en", "zh"):
        page = parse(site / lang / le.entry.id / "index.html")
        tags = page.tags
        assert not page.errors
        h1 = next(a for t, a in tags if t == "h1")
        assert h1.get("data-pagefind-weight") == str(WEIGHTS["entry_title"])
        sym = next(a for t, a in tags if t == "ul" and a.get("data-pagefind-meta") == "symptoms")
        assert sym["data-pagefind-weight"] == str(WEIGHTS["entry_symptoms"])
        err = next(a for t, a in tags if t == "ul" and a.get("data-pagefind-meta") == "errors")
        assert err["data-pagefind-weight"] == str(WEIGHTS["entry_errors"])
        html = _read(site, f"/{lang}/{le.entry.id}/")
        body = html.split('<section id="cli" data-pagefind-ignore>')[0]  # kb show: not indexed at all
        heads = re.findall(r"<h2[^>]*>", body)
        assert len(heads) >= 6 and all("data-pagefind-ignore" in h for h in heads), heads
        snippets = re.findall(r'<div class="snippet"[^>]*>', body)
        assert snippets and all(f'data-pagefind-weight="{WEIGHTS["entry_detail"]}"' in x for x in snippets)
        block = html.split('id="errors"')[1].split("</section>")[0]
        shown = re.findall(r"<li><code>(.*?)</code></li>", block, re.S)
        want = list(dict.fromkeys(sig.examples[0].strip() for sig in le.entry.signatures))
        assert [unescape(x) for x in shown] == want
        assert labels(lang)["errors"] in block
    bare = next(x for x in loaded if not x.entry.signatures)
    assert 'id="errors"' not in _read(site, f"/en/{bare.entry.id}/")


def test_home_page_carries_the_ranking_options_and_closed_filters(site):
    from sitegen.build import RANKING

    assert RANKING["metaWeights"]["kind"] == 0  # a label, never a reason to rank a page
    # the names field is a record page's own: an entry titled with a name does not get its boost
    rec = _read(site, "/en/params/deepspeed/zero_optimization.stage3_prefetch_bucket_size/")
    assert re.search(r'<p class="names" data-pagefind-meta="names"[^>]*>', rec)
    assert 'data-pagefind-meta="names"' not in _read(site, "/en/transformers-deepspeed-version-mismatch/")
    for lang in ("en", "zh"):
        html = _read(site, f"/{lang}/")
        cfg = json.loads(html.split('id="search-labels">')[1].split("</script>")[0])
        assert cfg["ranking"] == RANKING
        page = parse(site / lang / "index.html")
        box = next(a for t, a in page.tags if t == "details" and a.get("id") == "search-filters-box")
        assert "open" not in box  # the filters start closed: the first screen is for results
        assert "search-filters" in page.ids
    js = (site / "static" / "site.js").read_text(encoding="utf-8")
    # every bundle ranks with the same options: options() reaches the primary bundle only, so each mergeIndex
    # is given the same object (the ranking, the excerpt length) with the language added
    merges = re.findall(r"mergeIndex\(bundle\([^)]*\), (\w+)\)", js)
    assert len(merges) == 2 and set(merges) == {"merged"}, merges
    opts = re.search(r"var opts = \{([^}]*)\};", js).group(1)
    assert "ranking: L.ranking" in opts and "excerptLength: EXCERPT" in opts
    assert 'var merged = Object.assign({ language: "en" }, opts);' in js and "await m.options(opts);" in js


def test_every_page_has_the_favicon(site):
    import xml.etree.ElementTree as ET

    svg = ET.parse(site / "static" / "favicon.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and svg.get("viewBox")
    for p in _html_files(site):
        icons = [a for t, a in parse(p).tags if t == "link" and a.get("rel") == "icon"]
        assert len(icons) == 1, p
        target = urljoin("http://site/" + p.relative_to(site).as_posix(), icons[0]["href"])
        assert urlsplit(target).path == "/static/favicon.svg" and icons[0]["type"] == "image/svg+xml", p


def test_code_sources_link_the_exact_file_and_line(site, loaded):
    seen = 0
    for le in loaded:
        hrefs = set(parse(site / "en" / le.entry.id / "index.html").links())
        for s in le.entry.sources:
            if s.type == "code":
                url = code_url(s.model_dump())
                assert (
                    url and f"/blob/v{s.version}/" in url and url.split("#")[1].startswith(f"L{s.line.split('-')[0]}")
                )
                assert url in hrefs
                seen += 1
            elif s.url:
                assert s.url in hrefs
    assert seen > 50


def test_withdrawn_entry_is_shown_as_withdrawn(tmp_path):
    src = tmp_path / "entries"
    src.mkdir()
    for eid in ("zero3-single-gpu-no-offload", "pin-memory-offload"):
        shutil.copy(ENTRIES / f"{eid}.yaml", src / f"{eid}.yaml")
    p = src / "pin-memory-offload.yaml"
    p.write_text(
        p.read_text(encoding="utf-8") + "withdrawn: {date: 2026-12-01, reason: superseded by a test}\n",
        encoding="utf-8",
    )
    out = tmp_path / "site"
    rep = build_site(out, entries_root=src, index=False)
    assert rep["pages"]["entry"] == 4 and "seed" not in rep["pages"]
    for lang in ("en", "zh"):
        lb = labels(lang)
        page = _read(out, f"/{lang}/pin-memory-offload/")
        assert lb["withdrawn_badge"] in page and "superseded by a test" in page and 'role="alert"' in page
        home = _read(out, f"/{lang}/")
        assert lb["withdrawn_entries"] in home and "pin-memory-offload/" in home.split('id="withdrawn"')[1]
        assert 'role="alert"' not in _read(out, f"/{lang}/zero3-single-gpu-no-offload/")


# ---------------------------------------------------------------- registry pages


def test_every_used_record_has_its_page(site, loaded, registry):
    slugs = record_slugs([r["id"] for r in registry.records])
    used = sorted({rid for le in loaded for rid in le.entry.all_params()})
    assert len(used) > 100
    for rid in used:
        rec = registry.get(rid)
        assert rec is not None, rid
        for lang in ("en", "zh"):
            path = site / lang / "params" / slugs[rid] / "index.html"
            page = parse(path)
            assert not page.errors, (rid, page.errors)
            text = "".join(page.text)
            assert f"{rec['source_file']}:{rec['source_line']}" in text, rid
            assert code_url(record_source(rec)) in page.links()
            assert "history" in page.ids and f"{rec['package']} {rec['version']}" in text
            assert rec["path"] in text and rid in text
            users = [le.entry.id for le in loaded if rid in le.entry.all_params()]
            hrefs = page.links()
            assert all(f"../../../../{lang}/{eid}/" in hrefs for eid in users), rid


def test_parameter_page_fields(site, registry):
    rid = "deepspeed:zero_optimization.stage3_prefetch_bucket_size"
    rec = registry.get(rid)
    for lang in ("en", "zh"):
        lb = labels(lang)
        text = "".join(parse(site / lang / "params" / "deepspeed" / rec["path"] / "index.html").text)
        for key in ("param_type", "param_default", "param_aliases", "param_source", "param_history", "param_used_by"):
            assert lb[key] in text, (lang, key)
        assert rec["default"] in text and "prefetch_bucket_size" in text and "≥ 0" in text
    # a deprecated key points at its replacement
    dep = registry.get("deepspeed:zero_optimization.cpu_offload")
    page = parse(site / "en" / "params" / "deepspeed" / dep["path"] / "index.html")
    assert "../../../../en/params/deepspeed/zero_optimization.offload_optimizer/" in page.links()
    assert labels("en")["param_deprecated"] in "".join(page.text)


def test_parameter_index_lists_every_record_by_package(site, registry):
    for lang in ("en", "zh"):
        page = parse(site / lang / "params" / "index.html")
        assert not page.errors
        rows = [a["id"] for t, a in page.tags if t == "tr" and a.get("id", "").startswith("r-")]
        names = [r for r in registry.records if r["kind"] not in NOT_NAMES]  # code sites, front-end mappings
        assert len(rows) == len(names) == len(set(rows)) and len(names) < len(registry.records)
        assert {f"pkg-{p}" for p in registry.versions} <= page.ids


def test_record_slugs_are_unique_and_safe(registry):
    slugs = record_slugs([r["id"] for r in registry.records])
    assert len({s.lower() for s in slugs.values()}) == len(slugs)
    assert all(re.fullmatch(r"[A-Za-z0-9._~-]+/[A-Za-z0-9._~-]+", s) for s in slugs.values())
    assert (
        slugs["accelerate:cli/accelerate launch/--zero3_init_flag"]
        == "accelerate/cli~accelerate~launch~--zero3_init_flag"
    )


# ---------------------------------------------------------------- names that do not exist, seed claims


def test_names_page_covers_every_wrong_name_and_the_seed_names(site, loaded):
    wanted = {n.name for le in loaded for m in le.entry.myths for n in m.names if n.verdict in NAME_VERDICTS}
    assert set(SEED_NAMES) <= wanted
    for lang in ("en", "zh"):
        page = parse(site / lang / "names" / "index.html")
        assert not page.errors
        text = "".join(page.text)
        assert all(name in text for name in wanted)
        for le in loaded:
            for m in le.entry.myths:
                if any(n.verdict in NAME_VERDICTS for n in m.names):
                    assert (m.correction.zh if lang == "zh" else m.correction.en) in text
                    assert f"../../{lang}/{le.entry.id}/" in page.links()
        assert labels(lang)["names_seed"] in text
    html = _read(site, "/en/names/")
    block = html.split('id="n-zero_force_opt_offload-invented"')[1].split("</section>")[0]
    assert "zero_force_ds_cpu_optimizer" in block  # the correction says what to use


def test_entry_myth_names_link_to_the_names_page(site):
    page = parse(site / "en" / "zero-force-ds-cpu-optimizer" / "index.html")
    assert "../../en/names/#n-zero_force_opt_offload-invented" in page.links()
    names = parse(site / "en" / "names" / "index.html")
    assert "n-zero_force_opt_offload-invented" in names.ids


def test_seed_claims_page_links_every_claim_to_its_entry(site):
    claims = yaml.safe_load((ROOT / "data" / "seed-claims.yaml").read_text(encoding="utf-8"))["claims"]
    assert {c["verdict"] for c in claims} <= set(CLAIM_VERDICTS)
    for lang in ("en", "zh"):
        page = parse(site / lang / "seed-thread" / "index.html")
        assert not page.errors
        html = _read(site, f"/{lang}/seed-thread/")
        text = "".join(page.text)
        for c in claims:
            assert c["id"] in page.ids
            item = html.split(f'id="{c["id"]}"')[1].split("</li>")[0]
            href = f"../../{lang}/{c['entry']}/"
            assert f'href="{href}"' in item, c["id"]
            assert (site / lang / c["entry"] / "index.html").is_file()
            assert labels(lang)[f"claim_{c['verdict']}"] in item
            assert c["claim"][lang] in text


# ---------------------------------------------------------------- self-contained, well-formed, linked


def test_pages_are_well_formed(site):
    files = _html_files(site)
    assert len(files) > 800
    bad = {}
    for p in files:
        page = parse(p)
        if page.errors or page.stack:
            bad[p.relative_to(site).as_posix()] = (page.errors + [f"unclosed {page.stack}"])[:3]
    assert not bad, dict(list(bad.items())[:5])


def test_no_page_loads_anything_from_elsewhere(site):
    """Only <a href> may leave the site; canonical / alternate links name the public URL, they load nothing."""
    offenders = []
    for p in _html_files(site):
        for tag, a in parse(p).tags:
            for attr in ("src", "href", "srcset", "data", "poster", "action"):
                v = a.get(attr)
                if not v or tag == "a":
                    continue
                if tag == "link" and a.get("rel") in ("canonical", "alternate") and v.startswith(BASE):
                    continue
                if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", v, re.I):
                    offenders.append((p.relative_to(site).as_posix(), tag, attr, v))
    assert not offenders, offenders[:5]
    for name in ("site.css", "site.js"):
        text = (site / "static" / name).read_text(encoding="utf-8")
        assert not re.search(r"https?://|@import|url\(\s*['\"]?//", text), name


def test_internal_links_resolve(site):
    pages = {p.relative_to(site).as_posix(): parse(p) for p in _html_files(site)}
    broken = []
    for rel, page in pages.items():
        base = "http://site/" + rel
        for href in page.links():
            url = urlsplit(urljoin(base, href))
            if url.netloc != "site":
                continue
            target = unquote(url.path.lstrip("/"))
            target = target + "index.html" if target.endswith("/") or target == "" else target
            if target not in pages and not (site / target).is_file():
                broken.append((rel, href))
            elif url.fragment and target in pages and url.fragment not in pages[target].ids:
                broken.append((rel, href))
    assert not broken, broken[:10]


def test_lang_and_canonical(site):
    for p in _html_files(site):
        rel = p.relative_to(site).as_posix()
        html = p.read_text(encoding="utf-8")
        path = rel[: -len("index.html")]
        lang = "zh-CN" if rel.startswith("zh/") else "en"
        assert f'<html lang="{lang}"' in html, rel
        assert f'<link rel="canonical" href="{BASE}{path}">' in html, rel


def test_root_page_links_both_languages(site):
    page = parse(site / "index.html")
    assert {"en/", "zh/"} <= set(page.links())


def test_home_pages(site, loaded):
    for lang in ("en", "zh"):
        lb = labels(lang)
        page = parse(site / lang / "index.html")
        text = "".join(page.text)
        assert "q" in page.ids and "search-results" in page.ids and "search-labels" in page.ids
        for area in {le.entry.area for le in loaded}:
            assert f"area-{area}" in page.ids and lb[f"area_{area}"] in text
        hrefs = page.links()
        assert all(f"../{lang}/{le.entry.id}/" in hrefs for le in loaded)
        assert "kb lint ds_config.json" in text and lb["lint_title"] in text
        script = [a for t, a in page.tags if t == "script" and a.get("type") == "application/json"]
        assert script
        html = _read(site, f"/{lang}/")
        labels_json = json.loads(html.split('id="search-labels">')[1].split("</script>")[0])
        assert labels_json["results_count"] == lb["results_count"]


def test_pagefind_metadata_does_not_pollute_excerpts(site):
    """Filters and meta live on data-pagefind-ignore elements, except the metadata that is the page's own text
    (the title, the symptoms, the error messages: searched as metadata and as body); the indexed body of a
    page is its <main>."""
    html = _read(site, "/en/zero3-single-gpu-no-offload/")
    content_meta = ('data-pagefind-meta="title"', 'data-pagefind-meta="symptoms"', 'data-pagefind-meta="errors"')
    seen = set()
    for m in re.finditer(r"<[^>]*data-pagefind-(?:filter|meta)=[^>]*>", html):
        tag = m.group(0)
        if "data-pagefind-ignore" not in tag:
            assert any(c in tag for c in content_meta), tag
            seen.add(next(c for c in content_meta if c in tag))
    assert seen == set(content_meta)
    assert "data-pagefind-body" in html and 'data-pagefind-filter="area:oom"' in html
    assert "data-pagefind-body" not in _read(site, "/en/params/")  # 2,000 rows: a list, not a search result


# ---------------------------------------------------------------- labels, CLI, report, codec


def test_site_labels_have_the_same_keys_in_both_languages():
    assert SITE_LABELS["en"].keys() == SITE_LABELS["zh"].keys()
    assert all(v.strip() and "`" not in v for lang in SITE_LABELS for v in SITE_LABELS[lang].values())
    cjk = re.compile(r"[\u4e00-\u9fff]")
    # names, codes and the two areas whose names are the same English terms in Chinese writing
    english_only = {
        "html_lang",
        "site_name",
        "id",
        "source_issue",
        "area_lora",
        "area_offload",
        "lang_name",
        "other_lang",
    }
    missing = [k for k, v in SITE_LABELS["zh"].items() if k not in english_only and not cjk.search(v)]
    assert not missing, missing
    assert not set(SITE_LABELS["en"]) & set(LABELS["en"]), "site labels must not shadow the presenters' labels"


def test_templates_use_only_known_labels(registry):
    keys = set(labels("en"))
    used = set()
    for p in (ROOT / "sitegen" / "templates").glob("*.j2"):
        text = p.read_text(encoding="utf-8")
        used |= set(re.findall(r"\blb\.([a-z_]+)", text)) | set(re.findall(r"\blb\['([a-z_-]+)'\]", text))
    assert used and not used - keys, used - keys
    for prefix, values in (
        ("area_", AREAS),
        ("verdict_", (*NAME_VERDICTS, "misused")),
        ("claim_", CLAIM_VERDICTS),
        ("pkind_", {r["kind"] for r in registry.records}),
        ("source_", ("code", "docs", "issue", "measurement")),
    ):
        assert {prefix + v for v in values} <= keys, prefix


def test_chinese_pages_carry_no_english_labels(site):
    english = [v for k, v in SITE_LABELS["en"].items() if "{" not in v and v != SITE_LABELS["zh"][k] and len(v) > 2]
    english += [LABELS["en"][k] for k in ("cause", "fixes", "params", "myths", "sources", "applies", "related")]
    for rel in (
        "/zh/zero3-single-gpu-no-offload/",
        "/zh/names/",
        "/zh/seed-thread/",
        "/zh/",
        "/zh/params/deepspeed/zero_optimization.stage3_prefetch_bucket_size/",
    ):
        page = parse(site / rel.strip("/") / "index.html")
        assert page.label_text, rel
        text = "\n".join(page.label_text)  # not the entries' own text: it may quote an English error message
        leaked = [w for w in english if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text)]
        assert not leaked, (rel, leaked)


def test_reserved_folder_names_are_not_entry_ids(loaded):
    assert not {le.entry.id for le in loaded} & set(RESERVED)


@pytest.mark.slow  # a third site build, through the CLI
def test_export_command(tmp_path):
    from cli.main import main

    out = tmp_path / "site"
    res = CliRunner().invoke(main, ["export", str(out), "--lang", "en", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["langs"] == ["en"] and rep["pages"]["entry"] > 50 and rep["files"] > 100 and rep["bytes"] > 1e6
    assert set(rep["seconds"]) == {"render", "pagefind"}
    assert not (out / "zh").exists() and (out / "pagefind-en").is_dir() and not (out / "pagefind-zh").exists()
    assert "data-switch" not in (out / "en" / "zero3-single-gpu-no-offload" / "index.html").read_text(encoding="utf-8")
    assert report_text(rep).startswith(f"site written to {out} (en)")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    res = CliRunner().invoke(main, ["export", str(foreign)])
    assert res.exit_code == 2 and "not written by kb export" in res.output
    assert (foreign / "notes.txt").read_text() == "mine"
    res = CliRunner().invoke(main, ["export", str(out), "--base-url", "example.org", "--json"])
    assert res.exit_code == 2 and json.loads(res.output)["kind"] == "input"


def test_build_errors():
    with pytest.raises(SiteError, match="http"):
        build_site(Path("/nonexistent/x"), base_url="ftp://x")
    with pytest.raises(SiteError, match="language"):
        build_site(Path("/nonexistent/x"), langs=("fr",))


def test_root_of():
    assert root_of("/") == "" and root_of("/en/") == "../" and root_of("/en/params/deepspeed/x/") == "../../../../"


def test_cbor_codec_round_trips_pagefind_files(site):
    files = sorted((site / "pagefind-zh" / "filter").glob("*.pf_filter")) + sorted(
        (site / "pagefind-en").glob("*.pf_meta")
    )
    assert files
    for p in files:
        value = read_pf(p)
        assert cbor_decode(SIGNATURE + cbor_encode(value), len(SIGNATURE))[0] == value
        assert read_pf(p) == value and pf_bytes(value) == p.read_bytes()
    for v in (
        0,
        23,
        24,
        255,
        256,
        65535,
        65536,
        2**32,
        -1,
        -25,
        "显存",
        b"\x00",
        [1, [2, "a"]],
        {"k": True},
        None,
        False,
    ):
        assert cbor_decode(cbor_encode(v))[0] == v
