// abtest view: the cases list's filters and sort (kept in the URL), previous/next case keys,
// claims pinned to the chunks they were checked against, a running run's progress, runs
// whose summary is still being built, and review labels saved in place. No network access
// beyond the view's own server. Every page works without this script: the server filters,
// sorts and saves from the same query strings and forms.
(function () {
  "use strict";

  function $all(sel, root) { return Array.from((root || document).querySelectorAll(sel)); }
  function rows(table) { return Array.from(table.tBodies[0] ? table.tBodies[0].rows : []); }

  // ------------------------------------------------------------ simple filters (runs page)
  function applySimpleFilters(box) {
    var table = document.getElementById(box.dataset.table);
    if (!table) return;
    var cols = $all("[data-col]", box).filter(function (i) { return i.value.trim(); });
    var all = rows(table), shown = 0;
    all.forEach(function (tr) {
      var ok = cols.every(function (i) {
        var have = (tr.dataset[i.dataset.col] || "").toLowerCase();
        return have.indexOf(i.value.trim().toLowerCase()) >= 0;
      });
      tr.classList.toggle("hidden", !ok);
      if (ok) shown += 1;
    });
    var count = document.getElementById("runs-shown");
    if (count) {
      count.hidden = shown === all.length;
      document.getElementById("runs-shown-n").textContent = shown;
    }
    // the filters live in the URL, as the server reads them: a link or a reload shows the same
    if (box.tagName === "FORM") {
      var q = new URLSearchParams();
      cols.forEach(function (i) { if (i.name) q.set(i.name, i.value.trim()); });
      var url = location.pathname + (q.toString() ? "?" + q.toString() : "");
      if (url !== location.pathname + location.search) history.replaceState(null, "", url);
    }
  }

  // a table sorted in the page only (the runs list): a header is a button, with an arrow and
  // aria-sort; text as lowercase strings, numbers as numbers, blanks last, ties in page order
  function initSimpleSort(table) {
    rows(table).forEach(function (tr, i) { tr.dataset.idx = i; });
    var ths = Array.from(table.tHead.rows[0].cells);
    ths.forEach(function (th, col) {
      var btn = th.querySelector("button.sortbtn");
      if (!btn) return;
      btn.addEventListener("click", function () {
        var desc = th.getAttribute("aria-sort") === "ascending";
        var num = th.dataset.kind === "num";
        var key = function (tr) {
          var td = tr.cells[col];
          var raw = (td.dataset.sort !== undefined ? td.dataset.sort : td.textContent).trim();
          if (!raw) return null;
          return num ? parseFloat(raw) : raw.toLowerCase();
        };
        var body = table.tBodies[0];
        rows(table).map(function (tr) { return [key(tr), +tr.dataset.idx, tr]; })
          .sort(function (a, b) {
            if (a[0] === null || b[0] === null) {
              if (a[0] === null && b[0] === null) return a[1] - b[1];
              return a[0] === null ? 1 : -1;
            }
            var c = a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
            return (desc ? -c : c) || a[1] - b[1];
          }).forEach(function (x) { body.appendChild(x[2]); });
        ths.forEach(function (other) {
          other.setAttribute("aria-sort", other === th ? (desc ? "descending" : "ascending") : "none");
          var arrow = other.querySelector(".arrow");
          if (arrow) arrow.textContent = other === th ? (desc ? "▼" : "▲") : "";
        });
      });
    });
  }

  // ------------------------------------------------------------ the cases list (URL state)
  // The same rules as abtest/view/cases.py: a checked flag needs "yes"; a chosen value must
  // be one of the row's words; the free-text search is the server's (data-match). Sorting:
  // numbers as numbers, text as lowercase strings, blanks last, ties by case id.
  var SELECTS = ["incident", "answerable", "finished", "category", "issue"];

  function casesState(form) {
    var st = {only: [], select: {}, q: form.dataset.q || "", sort: "case", desc: false};
    $all("input[name=only]", form).forEach(function (i) { if (i.checked) st.only.push(i.value); });
    SELECTS.forEach(function (k) {
      var el = form.elements[k];
      if (el && el.value) st.select[k] = el.value;
    });
    var table = document.getElementById(form.dataset.table);
    st.sort = table.dataset.sort || "case";
    st.desc = table.dataset.dir === "desc";
    return st;
  }

  function stateFromURL() {
    var p = new URLSearchParams(window.location.search);
    var st = {only: p.getAll("only"), select: {}, q: p.get("q") || "",
              sort: p.get("sort") || "case", desc: p.get("dir") === "desc"};
    SELECTS.forEach(function (k) { if (p.get(k)) st.select[k] = p.get(k); });
    if (st.only.indexOf("incident") >= 0 && !st.select.incident) st.select.incident = "any";
    st.only = st.only.filter(function (f) { return f !== "incident"; });
    return st;
  }

  function qsOf(st) {   // the order abtest/view/cases.py's Query.qs writes
    var p = new URLSearchParams();
    st.only.forEach(function (f) { p.append("only", f); });
    SELECTS.forEach(function (k) { if (st.select[k]) p.append(k, st.select[k]); });
    if (st.q) p.append("q", st.q);
    if (st.sort && st.sort !== "case") p.append("sort", st.sort);
    if (st.desc) p.append("dir", "desc");
    var s = p.toString();
    return s ? "?" + s : "";
  }

  function rowPasses(tr, st) {
    if (st.only.some(function (f) { return tr.dataset[f] !== "yes"; })) return false;
    for (var k in st.select) {
      if ((tr.dataset[k] || "").split(" ").indexOf(st.select[k]) < 0) return false;
    }
    return tr.dataset.match !== "no";
  }

  function sortRows(table, st) {
    var ths = Array.from(table.tHead.rows[0].cells);
    var col = ths.findIndex(function (th) { return th.dataset.key === st.sort; });
    if (col < 0) col = 0;
    var num = ths[col].dataset.kind === "num";
    var key = function (tr) {
      var td = tr.cells[col];
      var raw = td.dataset.sort !== undefined ? td.dataset.sort : td.textContent;  // as written
      if (raw === "") return null;
      return num ? parseFloat(raw) : raw.toLowerCase();
    };
    var body = table.tBodies[0];
    // ties keep the report's order, which is by case id (as strings, not lowercased)
    var byId = function (a, b) { return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0; };
    rows(table).map(function (tr) { return [key(tr), tr.cells[0].textContent, tr]; })
      .sort(function (a, b) {
        if (a[0] === null || b[0] === null) {
          if (a[0] === null && b[0] === null) return byId(a, b);
          return a[0] === null ? 1 : -1;   // blanks last, either way
        }
        var c = a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
        return (st.desc ? -c : c) || byId(a, b);
      })
      .forEach(function (x) { body.appendChild(x[2]); });
    ths.forEach(function (th) {
      var on = th.dataset.key === st.sort;
      th.setAttribute("aria-sort", on ? (st.desc ? "descending" : "ascending") : "none");
      var arrow = th.querySelector(".arrow");
      if (arrow) arrow.textContent = on ? (st.desc ? "▼" : "▲") : "";
    });
    table.dataset.sort = st.sort;
    table.dataset.dir = st.desc ? "desc" : "asc";
  }

  function renderCases(form, st) {
    var table = document.getElementById(form.dataset.table);
    var base = form.getAttribute("action");
    sortRows(table, st);
    var shown = 0, inc = {A: 0, B: 0};
    var qs = qsOf(st);
    rows(table).forEach(function (tr) {
      var ok = rowPasses(tr, st);
      tr.classList.toggle("hidden", !ok);
      if (ok) {
        shown += 1;
        (tr.dataset.incident || "").split(" ").forEach(function (v) { if (v in inc) inc[v] += 1; });
      }
      var a = tr.querySelector("a.case-link");
      if (a) a.search = qs;   // a case page finds its previous / next in this list
    });
    $all("th[data-key] a.sort", table).forEach(function (a) {
      var key = a.parentNode.dataset.key;
      var next = {only: st.only, select: st.select, q: st.q, sort: key,
                  desc: key === st.sort ? !st.desc : false};
      a.setAttribute("href", base + qsOf(next));
    });
    var set = function (id, v) { var el = document.getElementById(id); if (el) el.textContent = v; };
    set("n-shown", shown);
    set("inc-a", inc.A);
    set("inc-b", inc.B);
    // the form submits the sort too (a search keeps the order)
    ["sort", "dir"].forEach(function (n) {
      var el = form.querySelector("input[type=hidden][name=" + n + "]");
      var want = n === "sort" ? (st.sort !== "case" ? st.sort : "") : (st.desc ? "desc" : "");
      if (!want) { if (el) el.remove(); return; }
      if (!el) {
        el = document.createElement("input");
        el.type = "hidden";
        el.name = n;
        form.appendChild(el);
      }
      el.value = want;
    });
  }

  function setControls(form, st) {
    $all("input[name=only]", form).forEach(function (i) { i.checked = st.only.indexOf(i.value) >= 0; });
    SELECTS.forEach(function (k) {
      var el = form.elements[k];
      if (el) el.value = st.select[k] || "";
    });
    var table = document.getElementById(form.dataset.table);
    table.dataset.sort = st.sort;
    table.dataset.dir = st.desc ? "desc" : "asc";
  }

  function initCases(form) {
    var table = document.getElementById(form.dataset.table);
    form.dataset.q = stateFromURL().q;
    var push = function (st) {
      var url = form.getAttribute("action") + qsOf(st);
      if (url !== window.location.pathname + window.location.search) {
        history.pushState(null, "", url);
      }
    };
    form.addEventListener("change", function (e) {
      if (e.target.name === "q") return;   // the search is the server's: Enter submits it
      var st = casesState(form);
      renderCases(form, st);
      push(st);
    });
    $all("th[data-key] a.sort", table).forEach(function (a) {
      a.addEventListener("click", function (e) {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;  // a new tab: the server
        e.preventDefault();
        var st = casesState(form);
        var key = a.parentNode.dataset.key;
        st.desc = key === st.sort ? !st.desc : false;
        st.sort = key;
        renderCases(form, st);
        push(st);
      });
    });
    var sync = function () {   // the URL is the truth: after Back, or a page restored from cache
      var st = stateFromURL();
      if (st.q !== form.dataset.q) { window.location.reload(); return; }
      setControls(form, st);
      renderCases(form, st);
    };
    window.addEventListener("popstate", sync);
    window.addEventListener("pageshow", function (e) { if (e.persisted) sync(); });
    // the server rendered the URL's list: redo it only if the controls say otherwise (a
    // browser that restored a control's old value), not on every load of 1,000 rows
    var now = casesState(form), want = stateFromURL();
    if (JSON.stringify([now.only, now.select]) !== JSON.stringify([want.only, want.select])) sync();
  }

  // ------------------------------------------------------------ a case: claims ↔ chunks, j/k
  function chunkEls(id) {
    return $all(".chunk").filter(function (c) { return c.dataset.chunk === id; });
  }

  function clearPins() {
    $all(".claim.lit, .chunk.lit").forEach(function (n) {
      n.classList.remove("lit");
      n.setAttribute("aria-pressed", "false");
    });
  }

  function pinClaim(cl) {
    var was = cl.classList.contains("lit");
    clearPins();
    if (was) return;   // a second click lets go
    cl.classList.add("lit");
    cl.setAttribute("aria-pressed", "true");
    var chunks = chunkEls(cl.dataset.chunk);
    chunks.forEach(function (c) { c.classList.add("lit"); });
    if (chunks[0]) reveal(chunks[0]);
  }

  // Bring a chunk into view. On wide screens the context column is sticky and scrolls by
  // itself: scroll it, not the page, so the claim that was clicked stays where it is.
  function reveal(el) {
    var col = el.closest(".context");
    var cs = col && window.getComputedStyle(col);
    if (!col || cs.position !== "sticky" || col.scrollHeight <= col.clientHeight) {
      el.scrollIntoView({block: "nearest", inline: "nearest"});
      return;
    }
    var pad = 8;
    var cr = col.getBoundingClientRect(), r = el.getBoundingClientRect();
    var top = Math.max(cr.top, 0) + pad, bottom = Math.min(cr.bottom, window.innerHeight) - pad;
    if (r.top < top) col.scrollTop -= top - r.top;
    else if (r.bottom > bottom) col.scrollTop += Math.min(r.bottom - bottom, r.top - top);
    r = el.getBoundingClientRect();
    if (r.top < 0 || r.top > window.innerHeight - 40) el.scrollIntoView({block: "nearest"});
  }

  function pinChunk(ch) {
    var was = ch.classList.contains("lit") && !$all(".claim.lit").length;
    clearPins();
    if (was) return;
    ch.classList.add("lit");
    ch.setAttribute("aria-pressed", "true");
    var claims = (ch.dataset.claims || "").split(" ").filter(Boolean)
      .map(function (id) { return document.getElementById("claim-" + id); }).filter(Boolean);
    claims.forEach(function (el) { el.classList.add("lit"); });
  }

  function activate(el, fn) {
    el.addEventListener("click", function () { fn(el); });
    el.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " " || e.key === "Spacebar") {
        e.preventDefault();   // Space would scroll the page
        fn(el);
      }
    });
  }

  function initCase() {
    $all(".claim").forEach(function (cl) {
      activate(cl, pinClaim);
      // hovering shows where a claim points without moving the pinned highlight
      var peek = function (on) {
        cl.classList.toggle("peek", on);
        chunkEls(cl.dataset.chunk).forEach(function (c) { c.classList.toggle("peek", on); });
      };
      cl.addEventListener("mouseenter", function () { peek(true); });
      cl.addEventListener("mouseleave", function () { peek(false); });
    });
    $all(".chunk").forEach(function (ch) { activate(ch, pinChunk); });
    var nav = document.getElementById("case-nav");
    if (!nav) return;
    document.addEventListener("keydown", function (e) {
      if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
      var t = e.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      var link = e.key === "j" ? document.getElementById("next-case")
        : e.key === "k" ? document.getElementById("prev-case") : null;
      if (link) {
        e.preventDefault();
        window.location.assign(link.href);
      }
    });
  }

  // ------------------------------------------------------------ review labels, saved in place
  // A label is posted as the form would post it, without leaving the page. While a run writes
  // the store the view cannot save (one writer at a time): the label stays selected, the item
  // says so, and the page tries again every 2 s until the run has finished.
  function saveLabel(form) {
    var status = form.querySelector(".save-status");
    var section = form.closest(".review-item");
    window.clearTimeout(+form.dataset.retry || 0);
    var chosen = form.querySelector("input[name=label]:checked");
    if (!chosen) { form.reportValidity(); return; }
    status.textContent = "saving…";
    status.className = "save-status";
    fetch(form.action, {method: "POST", credentials: "same-origin",
                        headers: {"Accept": "application/json"},
                        body: new URLSearchParams(new FormData(form))})
      .then(function (r) { return r.json(); })
      .then(function (j) {
        if (j.ok) {
          status.textContent = "saved";
          section.classList.remove("todo");
          section.classList.add("done");
          var badge = section.querySelector(".badge.given");
          if (badge) { badge.textContent = "labelled " + j.label; badge.hidden = false; }
          var prog = document.getElementById("review-progress");
          if (prog) prog.textContent = j.n_labelled + " of " + j.n_items + " labelled by " + j.reviewer;
          var todo = document.querySelector(".review-item.todo");
          var wrap = document.getElementById("next-unlabelled-wrap");
          if (wrap) wrap.hidden = !todo;
          var nextLink = document.getElementById("next-unlabelled");
          if (todo && nextLink) nextLink.setAttribute("href", "#" + todo.id);
          return;
        }
        if (j.busy) {
          status.textContent = "The store is busy: a run is writing it. Your label (" + chosen.value +
            ") is kept here and saved as soon as the run finishes (trying again every 2 s).";
          status.className = "save-status busy-note";
          form.dataset.retry = window.setTimeout(function () { saveLabel(form); }, 2000);
          return;
        }
        status.textContent = j.error || "not saved";
        status.className = "save-status no";
      })
      .catch(function () {
        status.textContent = "the view did not answer; trying again in 2 s";
        form.dataset.retry = window.setTimeout(function () { saveLabel(form); }, 2000);
      });
  }

  function initReview() {
    $all("form.label-form").forEach(function (form) {
      form.addEventListener("submit", function (e) {
        e.preventDefault();
        saveLabel(form);
      });
    });
  }

  // ------------------------------------------------------------ a run that may still move
  // A page of an unfinished run asks the server every poll_ms (body data-poll-ms) for the
  // run's version; when it moved (a case finished, a look taken, the run ended, died, or was
  // resumed by another process) the run page redraws its whole main (every section: counts,
  // withheld line, sequential looks, gate, backlog) from the server, and a cases or case page
  // follows its line and reloads once the state itself changes.
  function pollMs() { return +document.body.dataset.pollMs || 2000; }

  function redrawMain(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.querySelector("main"), main = document.querySelector("main");
    if (!fresh || !main) return;
    main.innerHTML = fresh.innerHTML;   // the server's own escaped markup
    initCopy();
    following = null;   // the old follower stops; a run that may still move gets a new one
    var box = document.querySelector("[data-progress]");
    if (box) followProgress(box);
  }

  var following = null;
  function followProgress(box) {
    var url = box.dataset.progress;
    var runPage = !!document.getElementById("claim") && !document.getElementById("case-filters");
    var token = {};
    following = token;
    var next = function () {
      window.setTimeout(function () {
        if (following !== token) return;   // a redraw started a new follower
        fetch(url, {credentials: "same-origin", cache: "no-store"})
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (p) {
            if (following !== token) return;
            if (!p || p.version === box.dataset.version) return next();
            var line = document.getElementById("progress-line");
            if (runPage) {
              return fetch(window.location.href, {credentials: "same-origin", cache: "no-store"})
                .then(function (r) { return r.ok ? r.text() : null; })
                .then(function (html) {
                  if (following !== token) return;
                  if (html) { redrawMain(html); if (following !== token) return; }
                  if (following === token) next();
                });
            }
            if (line) line.textContent = p.line;
            if (p.state !== box.dataset.state) { window.location.reload(); return; }
            box.dataset.version = p.version;
            next();
          }).catch(next);
      }, pollMs());
    };
    next();
  }

  // ------------------------------------------------------------ runs page: pending summaries
  function swapRow(tr, html) {
    var tmp = document.createElement("tbody");
    tmp.innerHTML = html.trim();   // the row as the server renders it (escaped there)
    var fresh = tmp.querySelector("tr");
    if (!fresh || !tr.parentNode) return null;
    fresh.dataset.idx = tr.dataset.idx || "";             // its place for the sort
    fresh.classList.toggle("hidden", tr.classList.contains("hidden"));  // and filters
    tr.parentNode.replaceChild(fresh, tr);
    initCopy(fresh);
    return fresh;
  }

  function fillPending() {
    var todo = $all("tr[data-pending]");
    function next() {
      var tr = todo.shift();
      if (!tr) return;
      fetch(tr.dataset.row, {credentials: "same-origin"}).then(function (r) { return r.text(); })
        .then(function (html) { swapRow(tr, html); }).catch(function () {}).then(next);
    }
    next(); next();
  }

  // ------------------------------------------------------------ runs page: runs that move
  // every poll_ms the page asks /states for every run's version, and redraws each row whose
  // version moved (and adds a run started since); a row is never left saying what its run
  // no longer is
  function followRuns(table) {
    var busy = false;
    window.setInterval(function () {
      if (busy) return;
      busy = true;
      fetch("/states", {credentials: "same-origin", cache: "no-store"})
        .then(function (r) { return r.ok ? r.json() : {}; })
        .then(function (states) {
          var rows = {};
          $all("tr[data-run]", table).forEach(function (tr) { rows[tr.dataset.run] = tr; });
          var jobs = [];
          Object.keys(states).forEach(function (rid) {
            var tr = rows[rid];
            if (tr && (tr.dataset.version === states[rid] || tr.dataset.pending)) return;
            var url = "/runs/" + encodeURIComponent(rid) + "/row";
            jobs.push(fetch(url, {credentials: "same-origin", cache: "no-store"})
              .then(function (r) { return r.ok ? r.text() : ""; })
              .then(function (html) {
                if (!html) return;
                if (tr) { swapRow(tr, html); return; }
                var body = table.tBodies[0];
                var holder = document.createElement("tr");
                body.insertBefore(holder, body.firstChild);   // newest first
                var fresh = swapRow(holder, html);
                var box = document.querySelector(".filters[data-table]");
                if (fresh && box) applySimpleFilters(box);
                var none = document.getElementById("no-runs");
                if (none) none.hidden = true;
              }).catch(function () {}));
          });
          return Promise.all(jobs);
        }).catch(function () {}).then(function () { busy = false; });
    }, pollMs());
  }

  // ------------------------------------------------------------ copy buttons
  function initCopy(root) {
    if (!navigator.clipboard) return;
    $all("button.copy[data-copy]", root).forEach(function (b) {
      if (b.dataset.ready) return;
      b.dataset.ready = "1";
      b.hidden = false;
      b.addEventListener("click", function () {
        navigator.clipboard.writeText(b.dataset.copy).then(function () {
          b.textContent = "copied";
        }, function () { b.textContent = "select and copy"; });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    fillPending();
    initCopy();
    var runsTable = document.getElementById("runs-table");
    if (runsTable) followRuns(runsTable);
    $all(".filters[data-table]").forEach(function (box) {
      if (box.id === "case-filters") return;
      box.addEventListener("input", function () { applySimpleFilters(box); });
      window.addEventListener("pageshow", function () { applySimpleFilters(box); });
      applySimpleFilters(box);
    });
    $all("table.sortable").forEach(function (t) { if (t.id !== "cases-table") initSimpleSort(t); });
    var form = document.getElementById("case-filters");
    if (form) initCases(form);
    initCase();
    initReview();
    var prog = document.querySelector("[data-progress]");
    if (prog) followProgress(prog);
  });
})();
