/* kb static site: copy buttons, and search over both Pagefind bundles (no network beyond this site). */
(function () {
  "use strict";
  var html = document.documentElement;
  var rootURL = new URL(html.getAttribute("data-root") || "./", location.href);

  // ------------------------------------------------------------ copy buttons
  function copyText(code) {
    var text = code.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(function () { return true; }, function () { return selectCopy(code); });
    }
    return Promise.resolve(selectCopy(code));
  }
  function selectCopy(code) {
    var range = document.createRange();
    range.selectNodeContents(code);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }
  Array.prototype.forEach.call(document.querySelectorAll("button[data-copy]"), function (b) {
    b.hidden = false;
    var label = b.textContent;
    b.addEventListener("click", function () {
      var code = b.closest(".snippet").querySelector("pre code");
      copyText(code).then(function (ok) {
        if (!ok) return;
        b.textContent = b.getAttribute("data-copied");
        b.setAttribute("data-done", "");
        setTimeout(function () { b.textContent = label; b.removeAttribute("data-done"); }, 1500);
      });
    });
  });

  // ------------------------------------------------------------ search
  var box = document.querySelector("[data-search]");
  if (!box) return;
  var L = JSON.parse(document.getElementById("search-labels").textContent);
  var input = document.getElementById("q");
  var status = document.getElementById("search-status");
  var list = document.getElementById("search-results");
  var more = document.getElementById("search-more");
  var filtersEl = document.getElementById("search-filters");
  // the filters (about 30 checkboxes) sit in a <details> that starts closed, so the first screen shows results
  var filtersBox = document.getElementById("search-filters-box");
  var filtersN = document.getElementById("search-filters-n");
  var langs = (html.getAttribute("data-bundles") || "en").split(/\s+/).filter(Boolean);
  var FILTER_KEYS = ["language", "area", "library", "kind"];
  var PAGE = 10;
  var EXCERPT = 20; // words of each result's excerpt, at most two lines (site.css)
  var SHORT = 2; // words this long or shorter are matched exactly (terms())
  var pagefind = null;
  var seq = 0;
  var current = [];
  var shown = 0;
  var timer = null;

  function bundle(lang) { return new URL("pagefind-" + lang + "/", rootURL).pathname; }
  function fmt(s, n) { return s.replace("{n}", String(n)); }
  function valueLabel(key, value) { return (L.values[key] && L.values[key][value]) || value; }

  function load() {
    if (!pagefind) {
      pagefind = (async function () {
        if (location.protocol === "file:") throw new Error("file://");
        var m = await import(new URL("pagefind.js", new URL(bundle(langs[0]), location.href)).href);
        // Every bundle is searched as "en": Pagefind then takes the query's words as given. Chinese runs
        // are cut beforehand with the Chinese index's own words (terms()); the browser's word segmenter,
        // which Pagefind would use for "zh-cn", cuts differently (显存 -> 显 存, the index has 显存).
        // Pagefind reads the primary bundle's language from <html lang> when its first call creates the
        // instance: that call is made while the attribute says "en", and it is put back right after.
        // The same options go to every bundle: options() sets only the primary one, and each merged bundle
        // keeps the options it was merged with (its ranking, and its excerpt length: Pagefind's default 30
        // words would make the Chinese results longer than the English ones). The ranking is RANKING of
        // sitegen/build.py.
        var opts = { baseUrl: rootURL.pathname, excerptLength: EXCERPT, ranking: L.ranking || undefined };
        await m.options(opts);
        var merged = Object.assign({ language: "en" }, opts);
        var pageLang = html.getAttribute("lang");
        html.setAttribute("lang", "en");
        var first;
        try {
          first = langs.length > 1 ? m.mergeIndex(bundle(langs[1]), merged) : m.init();
        } finally {
          html.setAttribute("lang", pageLang);
        }
        await first;
        for (var i = 2; i < langs.length; i++) {
          await m.mergeIndex(bundle(langs[i]), merged);
        }
        await m.init();
        var fl = await m.filters();
        total = Object.values(fl.kind || {}).reduce(function (x, y) { return x + y; }, 0) || 1;
        renderFilters(fl);
        return m;
      })();
    }
    return pagefind;
  }

  var CJK_RUN = /([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)/;
  var vocab = null;
  function loadVocab() {
    if (!vocab) {
      vocab = fetch(new URL("static/zh-words.json", rootURL).href)
        .then(function (r) { return r.ok ? r.json() : { max: 1, words: [] }; })
        .then(function (v) { return { max: v.max || 1, words: new Set(v.words || []) }; })
        .catch(function () { return { max: 1, words: new Set() }; });
    }
    return vocab;
  }
  // Cut a Chinese run into the index's own words, longest first; a character that is no word of the
  // index is dropped (Pagefind would match it as the start of an unrelated word: 足 -> 足够).
  // Returns groups of adjacent words: a dropped character ends a group.
  function cut(run, v) {
    var groups = [[]];
    var i = 0;
    while (i < run.length) {
      var n = Math.min(v.max, run.length - i);
      while (n > 1 && !v.words.has(run.substr(i, n))) n--;
      var w = run.substr(i, n);
      if (v.words.has(w)) groups[groups.length - 1].push(w);
      else if (groups[groups.length - 1].length) groups.push([]);
      i += n;
    }
    return groups.filter(function (g) { return g.length; });
  }

  // The query as searches: each word alone, and each pair of neighbouring words as an exact phrase
  // (a page that has "first step" or 第一步 together ranks above one that has the words apart).
  // A single Chinese character, and a word of SHORT letters or fewer ("to", "on", "I", "8"), is matched
  // exactly ("步", "to"): as a prefix it would match every word it starts (to -> tokenizer, torch).
  // Other words are matched as Pagefind does (stemmed, as the start of a word).
  async function terms(q) {
    var v = CJK_RUN.test(q) && langs.indexOf("zh") >= 0 ? await loadVocab() : null;
    var groups = [];
    q.split(/\s+/).forEach(function (tok) {
      tok.split(CJK_RUN).forEach(function (part) {
        if (!part) return;
        if (CJK_RUN.test(part)) {
          var cuts = v ? cut(part, v) : [[part]];
          cuts.forEach(function (g) { groups.push(g.map(function (w) { return { w: w, cjk: true }; })); });
        } else {
          var t = part.replace(/^[^\p{L}\p{N}_]+|[^\p{L}\p{N}_]+$/gu, "").replace(/"/g, "");
          if (t) groups.push([{ w: t, cjk: false }]);
        }
      });
    });
    var words = [];
    var phrases = [];
    function wordIndex(x) {
      var query = (x.cjk ? x.w.length === 1 : x.w.length <= SHORT) ? '"' + x.w + '"' : x.w;
      for (var k = 0; k < words.length; k++) if (words[k].query === query) return k;
      words.push({ query: query, word: x.w });
      return words.length - 1;
    }
    var prev = null;
    groups.forEach(function (g, gi) {
      g.forEach(function (x, i) {
        var at = wordIndex(x);
        // neighbours: inside a Chinese group, or two non-Chinese words in a row
        var before = i > 0 ? g[i - 1] : prev && !prev.cjk && !x.cjk && groups[gi - 1].length === 1 ? prev : null;
        if (before) {
          var query = '"' + before.w + " " + x.w + '"';
          if (!phrases.some(function (p) { return p.query === query; })) {
            phrases.push({ query: query, a: wordIndex(before), b: at });
          }
        }
      });
      prev = g[g.length - 1];
    });
    return { words: words, phrases: phrases };
  }

  // One search per word (Pagefind alone requires every word on the page: one word no page has, like 不足,
  // would leave nothing). A page scores, for each word it has, log(1 + Pagefind's score) times the word's
  // idf to the power IDF (so that no one word's score, a title match or a heavily weighted name, outweighs
  // the rest of the query, and a rare word counts more than "the" or 怎么); each neighbouring pair it has as
  // a phrase adds PHRASE times its two words' part again. idf: Pagefind's formula, from the pages a word is
  // found on out of all pages (total). Ties: the page id, so the order is stable. IDF and PHRASE were tuned
  // with bench/site_search.py on the entries' own queries (docs/site.md, "Ranking").
  var IDF = 0.5;
  var PHRASE = 0.25;
  var total = 1;
  function idf(df) { return Math.log(1 + (total - df + 0.5) / (df + 0.5)); }

  async function searchAll(m, q, filters) {
    var t = await terms(q);
    var ws = t.words.length ? t.words : [{ query: q, word: q }];
    var acc = new Map();
    var parts = []; // per word: page id -> its part of the page's score
    for (var i = 0; i < ws.length; i++) {
      var res = await m.search(ws[i].query, { filters: filters });
      var w = Math.pow(idf(res.results.length), IDF);
      var part = new Map();
      res.results.forEach(function (r) {
        var a = acc.get(r.id);
        if (!a) acc.set(r.id, (a = { id: r.id, n: 0, score: 0, best: r, terms: ws.map(function () { return 0; }) }));
        var x = w * Math.log1p(r.score);
        part.set(r.id, x);
        a.n += 1;
        a.terms[i] = r.score;
        a.score += x;
        if (r.score > a.best.score) a.best = r;
      });
      parts.push(part);
    }
    for (var j = 0; PHRASE > 0 && j < t.phrases.length; j++) {
      var ph = t.phrases[j];
      var found = await m.search(ph.query, { filters: filters });
      found.results.forEach(function (r) {
        var a = acc.get(r.id);
        if (a) a.score += PHRASE * ((parts[ph.a].get(r.id) || 0) + (parts[ph.b].get(r.id) || 0));
      });
    }
    return Array.from(acc.values()).sort(function (a, b) {
      return b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    });
  }

  // for tests and scripts: the ranked pages for a query, as the search box would list them
  window.kbSearch = async function (q, filters, limit) {
    var m = await load();
    var found = (await searchAll(m, q, filters || {})).slice(0, limit || 20);
    var data = await Promise.all(found.map(function (a) { return a.best.data(); }));
    var t = await terms(q);
    return {
      words: t.words.map(function (w) { return w.query; }),
      phrases: t.phrases.map(function (p) { return p.query; }),
      results: data.map(function (d, i) {
        return { url: d.url, title: d.meta && d.meta.title, kind: d.meta && d.meta.kind, n: found[i].n,
                 score: found[i].score, terms: found[i].terms };
      }),
    };
  };

  function order(key, values) {
    var known = (L.order && L.order[key]) || [];
    return values.slice().sort(function (a, b) {
      var ia = known.indexOf(a), ib = known.indexOf(b);
      if (ia !== ib) return (ia < 0 ? 1e9 : ia) - (ib < 0 ? 1e9 : ib);
      return a < b ? -1 : a > b ? 1 : 0;
    });
  }

  function renderFilters(all) {
    filtersEl.replaceChildren();
    FILTER_KEYS.forEach(function (key) {
      var values = Object.keys(all[key] || {});
      if (values.length < 2) return;
      var fs = document.createElement("fieldset");
      fs.setAttribute("data-filter", key);
      var lg = document.createElement("legend");
      lg.textContent = L["filter_" + key];
      fs.append(lg);
      order(key, values).forEach(function (v) {
        var lab = document.createElement("label");
        var cb = document.createElement("input");
        cb.type = "checkbox";
        cb.name = key;
        cb.value = v;
        cb.addEventListener("change", function () { countFilters(); schedule(0); });
        lab.append(cb, document.createTextNode(valueLabel(key, v)));
        fs.append(lab);
      });
      filtersEl.append(fs);
    });
    filtersBox.hidden = !filtersEl.children.length;
    countFilters();
  }

  // the closed box says how many filters are on: "Filters (2)"
  function countFilters() {
    var n = filtersEl.querySelectorAll("input:checked").length;
    filtersN.textContent = n ? "(" + n + ")" : "";
  }

  function selected() {
    var out = {};
    Array.prototype.forEach.call(filtersEl.querySelectorAll("input:checked"), function (cb) {
      (out[cb.name] = out[cb.name] || { any: [] }).any.push(cb.value);
    });
    return out;
  }

  function setState(state, text) {
    status.setAttribute("data-state", state);
    if (text !== undefined) status.textContent = text;
  }

  function schedule(ms) {
    seq++;
    setState("pending");
    clearTimeout(timer);
    timer = setTimeout(run, ms);
  }

  async function run() {
    var my = ++seq;
    var q = input.value.trim();
    var url = new URL(location.href);
    if (q) url.searchParams.set("q", q); else url.searchParams.delete("q");
    history.replaceState(null, "", url);
    if (!q) {
      list.replaceChildren();
      more.hidden = true;
      current = [];
      setState("idle", "");
      return;
    }
    var m;
    try {
      if (!pagefind) setState("loading", L.search_loading);
      m = await load();
    } catch (e) {
      setState("error", L.search_unavailable);
      return;
    }
    var found = await searchAll(m, q, selected());
    if (my !== seq) return;
    current = found.map(function (a) { return a.best; });
    shown = 0;
    list.replaceChildren();
    await showMore(my);
    if (my !== seq) return;
    status.setAttribute("data-count", String(current.length));
    status.setAttribute("data-query", q);
    setState("done", current.length ? fmt(L.results_count, current.length) : L.results_none);
  }

  async function showMore(my) {
    var batch = current.slice(shown, shown + PAGE);
    var data = await Promise.all(batch.map(function (r) { return r.data(); }));
    if (my !== seq) return;
    data.forEach(function (d) {
      var li = document.createElement("li");
      var lang = (d.filters && d.filters.language && d.filters.language[0]) || "";
      if (lang) li.lang = lang === "zh" ? "zh-CN" : "en";
      var a = document.createElement("a");
      a.className = "r-title";
      a.href = d.url;
      a.textContent = (d.meta && d.meta.title) || d.url;
      a.title = a.textContent; // the title shows two lines at most (site.css): the whole of it on hover
      var meta = document.createElement("span");
      meta.className = "r-meta dim";
      var kind = (d.meta && d.meta.kind) || "";
      meta.textContent = [valueLabel("language", lang), valueLabel("kind", kind)].filter(Boolean).join(" · ");
      var ex = document.createElement("span");
      ex.innerHTML = d.excerpt; // Pagefind's excerpt: the page's text, HTML-escaped, with <mark> around the hits
      var p = document.createElement("p");
      p.append(meta, " ", ex); // language and kind start the excerpt's line: no line of their own
      li.append(a, p);
      list.append(li);
    });
    shown += batch.length;
    more.hidden = shown >= current.length;
  }

  input.addEventListener("input", function () { schedule(120); });
  input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); schedule(0); } });
  input.addEventListener("focus", function () { load().catch(function () {}); }, { once: true });
  more.addEventListener("click", function () { showMore(seq); });
  var q0 = new URLSearchParams(location.search).get("q");
  if (q0) { input.value = q0; schedule(0); }
})();
