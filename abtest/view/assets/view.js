// abtest view: table filters and sorting, and claims linked to the chunks they were checked
// against. No network access: everything is in the page.
(function () {
  "use strict";

  function rows(table) { return Array.from(table.tBodies[0] ? table.tBodies[0].rows : []); }

  function applyFilters(box) {
    var table = document.getElementById(box.dataset.table);
    if (!table) return;
    var flags = Array.from(box.querySelectorAll("input[data-flag]:checked")).map(function (i) { return i.dataset.flag; });
    var cols = Array.from(box.querySelectorAll("[data-col]")).filter(function (i) { return i.value; });
    var shown = 0;
    rows(table).forEach(function (tr) {
      var ok = flags.every(function (f) { return tr.dataset[f] === "yes"; }) &&
        cols.every(function (i) {
          var have = (tr.dataset[i.dataset.col] || "").toLowerCase();
          return i.tagName === "SELECT" ? have === i.value.toLowerCase() : have.indexOf(i.value.toLowerCase()) >= 0;
        });
      tr.classList.toggle("hidden", !ok);
      if (ok) shown += 1;
    });
    var count = box.querySelector(".count");
    if (count) count.textContent = shown + " of " + rows(table).length + " shown";
  }

  function sortBy(table, col, th) {
    var asc = th.dataset.dir !== "asc";
    Array.from(table.tHead.rows[0].cells).forEach(function (c) { delete c.dataset.dir; });
    th.dataset.dir = asc ? "asc" : "desc";
    var key = function (tr) {
      var td = tr.cells[col];
      var raw = td.dataset.sort !== undefined ? td.dataset.sort : td.textContent.trim();
      var n = parseFloat(raw);
      return raw === "" ? null : (isNaN(n) ? raw.toLowerCase() : n);
    };
    var body = table.tBodies[0];
    rows(table).sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === null) return 1;
      if (y === null) return -1;
      return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
    }).forEach(function (tr) { body.appendChild(tr); });
  }

  function light(nodes, on) { nodes.forEach(function (n) { n.classList.toggle("lit", on); }); }

  function chunkEls(id) {
    return Array.from(document.querySelectorAll(".chunk")).filter(function (c) { return c.dataset.chunk === id; });
  }

  // runs whose summary is neither stored nor in the server's memory: ask for each after the
  // page has rendered, two at a time (each builds that run's report once)
  function fillPending() {
    var todo = Array.from(document.querySelectorAll("tr[data-pending]"));
    function next() {
      var tr = todo.shift();
      if (!tr) return;
      fetch(tr.dataset.pending, {credentials: "same-origin"}).then(function (r) { return r.json(); })
        .then(function (s) {
          var claim = tr.querySelector(".claim-cell"), gate = tr.querySelector(".gate-cell");
          claim.textContent = s.claim;
          claim.className = "claim-cell " + (s.licensed ? "ok" : "no");
          gate.textContent = s.gate;
          gate.className = "gate-cell gate-" + s.gate;
          var res = tr.querySelector(".resolved");
          if (res) res.textContent = s.resolved || "";
          tr.removeAttribute("data-pending");
        }).catch(function () {}).then(next);
    }
    next(); next();
  }

  document.addEventListener("DOMContentLoaded", function () {
    fillPending();
    // a link may preset one filter of the cases page (?only=incident|flipped|checkfail|…)
    var only = new URLSearchParams(window.location.search).get("only");
    if (only) {
      var box = document.querySelector("input[data-flag='" + only.replace(/[^a-z]/g, "") + "']");
      if (box) box.checked = true;
    }
    document.querySelectorAll(".filters").forEach(function (box) {
      box.addEventListener("input", function () { applyFilters(box); });
      box.addEventListener("change", function () { applyFilters(box); });
      applyFilters(box);
    });
    document.querySelectorAll("table.sortable").forEach(function (table) {
      Array.from(table.tHead.rows[0].cells).forEach(function (th, i) {
        th.addEventListener("click", function () { sortBy(table, i, th); });
      });
    });
    // hover (or focus) a claim: its chunk lights up
    document.querySelectorAll(".claim").forEach(function (cl) {
      var on = function () { light(chunkEls(cl.dataset.chunk), true); cl.classList.add("lit"); };
      var off = function () { light(chunkEls(cl.dataset.chunk), false); cl.classList.remove("lit"); };
      cl.addEventListener("mouseenter", on); cl.addEventListener("focus", on);
      cl.addEventListener("mouseleave", off); cl.addEventListener("blur", off);
    });
    // click a chunk: the claims checked against it light up (click again to clear)
    document.querySelectorAll(".chunk").forEach(function (ch) {
      ch.addEventListener("click", function () {
        var on = !ch.classList.contains("lit");
        document.querySelectorAll(".claim.lit, .chunk.lit").forEach(function (n) { n.classList.remove("lit"); });
        if (!on) return;
        ch.classList.add("lit");
        (ch.dataset.claims || "").split(" ").filter(Boolean).forEach(function (id) {
          var el = document.getElementById("claim-" + id);
          if (el) el.classList.add("lit");
        });
      });
    });
  });
})();
