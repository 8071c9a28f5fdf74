"""The static site in a real browser: search (Pagefind, both bundles), the language switch, filters, links.

Chromium (Debian's, /usr/bin/chromium) through sync Playwright; the site is built once for the module, with a
decoy page added before indexing, and served on 127.0.0.1 from a thread. Every request that would leave
127.0.0.1 is blocked and recorded. Screenshots go to test-artifacts/. Without Chromium or Playwright the tests
skip, except under CI=true, where they fail.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from sitegen.build import build_site, index_site
from sitegen.serve import serve_in_thread
from tests.conftest import ROOT, in_ci

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"
TOP = 5  # "among the first results"
DECOY = "/en/decoy-stage3-words-apart/"
DECOY_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>decoy</title></head>
<body><main data-pagefind-body>
<h1 data-pagefind-weight="10">stage3 prefetch bucket size: stage3, then prefetch, a bucket, its size</h1>
<p data-pagefind-weight="10">The stage3 prefetch of each bucket has a size; stage3 bucket prefetch size;
zero optimization offload optimizer pin memory; offload the optimizer, pin the memory. stage3 prefetch bucket size.</p>
</main></body></html>
"""


def _unavailable(reason: str):
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site-browser") / "kb"
    build_site(out, index=False)
    decoy = out / DECOY.strip("/") / "index.html"
    decoy.parent.mkdir(parents=True)
    decoy.write_text(DECOY_HTML, encoding="utf-8")
    index_site(out)
    return out


@pytest.fixture(scope="module")
def site_url(site_dir):
    server, url = serve_in_thread(site_dir)
    yield url.rstrip("/")
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def prefixed_url(site_dir):
    """The same site under a path prefix (/kb/), as on GitHub Pages for a project."""
    server, url = serve_in_thread(site_dir.parent)
    yield url + site_dir.name
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium fonts-wqy-microhei)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def outside():
    """Every request a page tried to make to anything but 127.0.0.1 (blocked)."""
    return []


@pytest.fixture
def page(browser, site_url, outside):
    ctx = browser.new_context(viewport={"width": 1100, "height": 1300}, locale="en-US")
    host = urlsplit(site_url).netloc

    def route(r):
        u = urlsplit(r.request.url)
        if u.scheme in ("http", "https", "ws", "wss") and u.netloc != host:
            outside.append(r.request.url)
            r.abort()
        else:
            r.continue_()

    ctx.route("**/*", route)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    ctx.close()
    assert not errors, errors
    assert not outside, outside[:5]


def search(pg, site_url: str, q: str, lang: str = "en") -> list[str]:
    """Type ``q`` into the home page's box; wait until the results for it are shown; their paths, best first."""
    if not pg.url.startswith(f"{site_url}/{lang}/") or urlsplit(pg.url).path != f"/{lang}/":
        pg.goto(f"{site_url}/{lang}/")
    pg.fill("#q", q)
    wait_done(pg, q)
    return pg.eval_on_selector_all("#search-results a.r-title", "els => els.map(a => new URL(a.href).pathname)")


def wait_done(pg, q: str) -> None:
    pg.wait_for_function(
        "q => { const s = document.getElementById('search-status');"
        " return s.dataset.state === 'done' && s.dataset.query === q; }",
        arg=q,
        timeout=30_000,
    )


def shot(pg, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    pg.screenshot(path=str(path))
    print(f"screenshot: {path}")
    return path


# ---------------------------------------------------------------- search


def test_english_search_finds_the_entry(page, site_url):
    hits = search(page, site_url, "zero3 oom first step")
    assert "/en/zero3-single-gpu-no-offload/" in hits[:TOP], hits[:TOP]
    count = int(page.get_attribute("#search-status", "data-count"))
    assert count >= len(hits) > 0
    assert page.locator("#search-results li p mark").count() > 0  # the excerpt, with the hits marked
    shot(page, "search-en.png")


@pytest.mark.parametrize("q", ["显存不足 第一步", "ZeRO-3第一步就OOM"])
def test_chinese_search_finds_the_chinese_entry(page, site_url, q):
    hits = search(page, site_url, q, lang="zh")
    assert "/zh/zero3-single-gpu-no-offload/" in hits[:TOP], hits[:TOP]
    assert page.inner_text("#search-status").endswith("条结果")
    if q == "显存不足 第一步":
        shot(page, "search-zh.png")


@pytest.mark.parametrize(
    "q, want",
    [
        ("stage3_prefetch_bucket_size", "/en/params/deepspeed/zero_optimization.stage3_prefetch_bucket_size/"),
        (
            "zero_optimization.offload_optimizer.pin_memory",
            "/en/params/deepspeed/zero_optimization.offload_optimizer.pin_memory/",
        ),
        ("zero_force_ds_cpu_optimizer", "/en/params/deepspeed/zero_force_ds_cpu_optimizer/"),
    ],
)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_full_parameter_name_finds_its_page_first(page, site_url, q, want, lang):
    hits = search(page, site_url, q, lang=lang)
    assert hits and hits[0] == want, hits[:3]
    assert DECOY not in hits[:TOP]  # the same words, apart, on a heavily weighted page


def test_the_decoy_is_found_by_its_words(page, site_url):
    """The decoy is indexed: it loses above only because its words are apart."""
    assert DECOY in search(page, site_url, "stage3 prefetch bucket size")[:TOP]


def test_a_filter_narrows_the_results(page, site_url):
    search(page, site_url, "offload")
    total = int(page.get_attribute("#search-status", "data-count"))
    page.click("#search-filters-box summary")  # the filters start closed
    page.check("#search-filters fieldset[data-filter=area] input[value=offload]")
    assert page.inner_text("#search-filters-n") == "(1)"  # the closed box says that a filter is on
    wait_done(page, "offload")
    narrowed = int(page.get_attribute("#search-status", "data-count"))
    assert 0 < narrowed < total
    page.check("#search-filters fieldset[data-filter=language] input[value=zh]")
    wait_done(page, "offload")
    hits = page.eval_on_selector_all("#search-results a.r-title", "els => els.map(a => new URL(a.href).pathname)")
    assert hits and all(h.startswith("/zh/") for h in hits)
    assert int(page.get_attribute("#search-status", "data-count")) < narrowed


# the first screen: 1280x900, the size the issue measured (1.5 results visible with the filters open)
FIRST_SCREEN = {"width": 1280, "height": 900}
WHOLE_RESULTS = """() => Array.from(document.querySelectorAll('#search-results li'))
    .filter(li => { const r = li.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }).length"""
README_QUERIES = [("en", "zero3 oom first step"), ("zh", "ZeRO-3第一步就OOM"), ("zh", "显存不足 第一步")]


@pytest.mark.parametrize("lang, q", README_QUERIES)
def test_the_first_screen_shows_five_results_and_closed_filters(page, site_url, lang, q):
    page.set_viewport_size(FIRST_SCREEN)
    hits = search(page, site_url, q, lang=lang)
    assert len(hits) >= 5
    box = page.locator("#search-filters-box")
    assert box.is_visible() and not box.evaluate("d => d.open")
    assert not page.locator("#search-filters input").first.is_visible()
    assert page.evaluate(WHOLE_RESULTS) >= 5  # whole: title, kind and excerpt inside the screen, not scrolled
    shot(page, f"first-screen-{lang}-{len(q)}.png")
    page.click("#search-filters-box summary")
    boxes = page.locator("#search-filters input[type=checkbox]")
    assert boxes.count() >= 20 and boxes.first.is_visible()
    assert page.evaluate(WHOLE_RESULTS) < 5  # (what the closed box saves: the open filters push results down)


@pytest.mark.parametrize("lang, q", README_QUERIES)
def test_the_readme_queries_find_their_entry_in_the_top_three(page, site_url, lang, q):
    hits = search(page, site_url, q, lang=lang)
    assert f"/{lang}/zero3-single-gpu-no-offload/" in hits[:3] or "/en/zero3-single-gpu-no-offload/" in hits[:3], hits[
        :5
    ]


def test_symptom_queries_rank_entries_above_parameter_pages(page, site_url):
    """The entries' own queries (a fixed sample of bench/site_search.py's dev set; never the held-out set):
    an entry page comes first, not a parameter page, and the expected entry is among the first three for most
    of them (bench/site_search.py measures all of them: docs/site.md)."""
    from kb.content.entries import load_entries

    qs = [(le.entry.id, q) for le in load_entries(ROOT / "data/entries") for _, q in le.entry.queries.all()][::10]
    assert len(qs) > 60
    page.goto(f"{site_url}/en/")
    got = page.evaluate(
        "async qs => { const out = []; for (const q of qs) out.push((await window.kbSearch(q, {}, 3)).results); return out; }",
        [q for _, q in qs],
    )
    first = [r[0]["kind"] if r else None for r in got]
    assert all(k == "entry" for k in first), [(q, k) for (_, q), k in zip(qs, first, strict=True) if k != "entry"]
    top3 = sum(any(x["url"].rstrip("/").endswith("/" + eid) for x in r) for (eid, _), r in zip(qs, got, strict=True))
    assert top3 / len(qs) >= 0.85, top3 / len(qs)


def test_the_favicon_is_served_and_drawn(page, site_url):
    page.goto(f"{site_url}/zh/params/deepspeed/zero_optimization.stage3_prefetch_bucket_size/")
    href = page.eval_on_selector("link[rel=icon]", "l => l.href")
    assert urlsplit(href).path == "/static/favicon.svg"
    resp = page.request.get(href)
    assert resp.status == 200 and resp.headers["content-type"].startswith("image/svg+xml")
    width = page.evaluate(
        "h => new Promise(ok => { const i = new Image(); i.onload = () => ok(i.naturalWidth);"
        " i.onerror = () => ok(0); i.src = h; })",
        href,
    )
    assert width > 0  # Chromium draws it


def test_the_js_api_gives_the_same_ranking(page, site_url):
    page.goto(f"{site_url}/en/")
    res = page.evaluate("q => window.kbSearch(q)", "ZeRO-3第一步就OOM")
    assert "/zh/zero3-single-gpu-no-offload/" in [r["url"] for r in res["results"][:TOP]]
    direct = page.evaluate(
        "async () => { const m = await import('/pagefind-en/pagefind.js');"
        " const s = await m.search('zero_force_opt_offload'); return s.results.length; }"
    )
    assert direct > 0


def test_search_works_under_a_path_prefix(browser, prefixed_url):
    ctx = browser.new_context()
    pg = ctx.new_page()
    try:
        pg.goto(f"{prefixed_url}/zh/")
        pg.fill("#q", "stage3_prefetch_bucket_size")
        wait_done(pg, "stage3_prefetch_bucket_size")
        hits = pg.eval_on_selector_all("#search-results a.r-title", "els => els.map(a => new URL(a.href).pathname)")
        assert hits[0] == "/kb/en/params/deepspeed/zero_optimization.stage3_prefetch_bucket_size/"
        pg.click("#search-results a.r-title")
        pg.wait_for_url(f"{prefixed_url}/en/params/deepspeed/zero_optimization.stage3_prefetch_bucket_size/")
        assert pg.locator("h1 code").inner_text() == "stage3_prefetch_bucket_size"
    finally:
        ctx.close()


def test_header_search_lands_on_the_home_search(page, site_url):
    page.goto(f"{site_url}/zh/pin-memory-offload/")
    page.fill("#mini-q", "pin_memory")
    page.press("#mini-q", "Enter")
    page.wait_for_url(f"{site_url}/zh/?q=pin_memory")
    wait_done(page, "pin_memory")
    assert page.locator("#search-results li").count() > 0


# ---------------------------------------------------------------- pages


def test_the_language_switch_lands_on_the_same_entry(page, site_url):
    page.goto(f"{site_url}/en/zero3-single-gpu-no-offload/")
    page.click("[data-switch]")
    page.wait_for_url(f"{site_url}/zh/zero3-single-gpu-no-offload/")
    assert page.get_attribute("html", "lang") == "zh-CN"
    assert "单卡 ZeRO-3" in page.inner_text("h1")
    page.click("[data-switch]")
    page.wait_for_url(f"{site_url}/en/zero3-single-gpu-no-offload/")
    assert page.get_attribute("html", "lang") == "en"


def test_entry_page_snippet_copies_whole(page, site_url, browser):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site_url)
    page.goto(f"{site_url}/zh/zero3-single-gpu-no-offload/")
    snippet = page.locator("#fix-1 .snippet")
    code = snippet.locator("pre code").inner_text()
    assert code.startswith("{") and '"offload_param": {"device": "cpu", "pin_memory": true}' in code
    button = snippet.locator("button[data-copy]")
    assert button.is_visible() and button.inner_text() == "复制"
    button.click()
    page.wait_for_selector("#fix-1 button[data-copy][data-done]")
    assert page.evaluate("() => navigator.clipboard.readText()") == code
    shot(page, "entry-zh.png")


def test_pages_fit_a_phone_in_dark_mode(browser, site_url):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    pg = ctx.new_page()
    try:
        for path in ("/zh/zero3-single-gpu-no-offload/", "/en/params/", "/zh/names/"):
            pg.goto(site_url + path)
            width = pg.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390, (path, width)  # wide code and tables scroll inside their box
            bg = pg.evaluate("() => getComputedStyle(document.body).backgroundColor")
            assert bg != "rgb(255, 255, 255)", bg
    finally:
        ctx.close()


def _http_crawl(site_url: str) -> tuple[set[str], list, list]:
    """Every page reachable from / over HTTP (urllib + html.parser): seen paths, broken links, missing anchors."""
    import urllib.error
    import urllib.request
    from html.parser import HTMLParser

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.ids, self.hrefs = set(), []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if a.get("id"):
                self.ids.add(a["id"])
            if tag == "a" and a.get("href"):
                self.hrefs.append(a["href"])
            if tag in ("link", "script", "img") and (a.get("href") or a.get("src")):
                self.hrefs.append(a.get("href") or a.get("src"))

    seen, ids, anchors, broken = set(), {}, [], []
    queue = deque(["/"])
    while queue:
        path = queue.popleft()
        if path in seen:
            continue
        seen.add(path)
        try:
            with urllib.request.urlopen(site_url + path, timeout=10) as resp:
                body = resp.read().decode("utf-8", "replace")
                ctype = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError:
            broken.append(path)
            continue
        if "html" not in ctype:
            continue
        parser = Links()
        parser.feed(body)
        ids[path] = parser.ids
        for href in parser.hrefs:
            url, frag = urldefrag(urljoin(site_url + path, href))
            u = urlsplit(url)
            if f"{u.scheme}://{u.netloc}" != site_url:
                continue
            if frag:
                anchors.append((path, u.path, frag))
            if u.path not in seen:
                queue.append(u.path)
    missing = [(src, t, f) for src, t, f in anchors if t in ids and f not in ids[t]]
    return seen, broken, missing


def test_crawl_finds_no_broken_link_and_nothing_leaves_the_machine(page, site_url):
    """Every page over HTTP: no broken internal link or anchor. In the browser, one page of every kind in both
    languages (all pages of a kind share one template): no request leaves 127.0.0.1 (the page fixture blocks
    and records any) and no script error."""
    seen, broken, missing = _http_crawl(site_url)
    assert not broken, broken[:10]
    assert not missing, missing[:10]
    pages = {p for p in seen if p.endswith("/")}
    assert len(pages) > 800  # every page: home, entries, parameters, names, seed thread, in both languages
    kinds = {}
    for p in sorted(pages):
        parts = [x for x in p.split("/") if x]
        kind = (
            "/".join(parts[:2])
            if len(parts) > 1 and parts[1] in ("params", "names", "seed-thread")
            else (f"{parts[0]}/entry" if len(parts) == 2 else (parts[0] if parts else "root"))
        )
        if len(parts) > 2 and parts[1] == "params":
            kind = f"{parts[0]}/param"
        kinds.setdefault(kind, p)
    assert len(kinds) >= 10, kinds
    for p in kinds.values():
        resp = page.goto(site_url + p, wait_until="load")
        assert resp is not None and resp.status == 200, p
