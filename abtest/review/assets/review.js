(function (root) {
  "use strict";
  var FORMAT = "abtest-review-labels";

  function allowed(item) {
    return item.allowed_labels || (item.kind === "pairwise" ? ["1", "2", "tie"] : ["supported", "unsupported"]);
  }

  // The download: {format, version, pack_id, reviewer, exported_at, labels: [{item_id, label, note}]}
  function buildPayload(pack, state, reviewer, now) {
    var labels = [];
    pack.items.forEach(function (it) {
      var s = state[it.item_id];
      if (!s || !s.label || allowed(it).indexOf(s.label) < 0) { return; }
      labels.push({item_id: it.item_id, label: s.label, note: s.note || ""});
    });
    return {format: FORMAT, version: 1, pack_id: pack.pack_id, reviewer: String(reviewer || "").trim(),
            exported_at: now || new Date().toISOString(), labels: labels};
  }

  root.abtestReview = {buildPayload: buildPayload, allowed: allowed, FORMAT: FORMAT};
  if (typeof document === "undefined") { return; }

  var pack = JSON.parse(document.getElementById("abtest-pack").textContent);
  var items = pack.items;
  var KEY = "abtest-review:" + pack.pack_id;
  var state = {}, cur = 0, dirty = false;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function save() {
    try { localStorage.setItem(KEY, JSON.stringify({state: state, reviewer: reviewerBox.value, cur: cur})); } catch (e) { /* file:// without storage */ }
  }
  function restore() {
    try {
      var raw = localStorage.getItem(KEY);
      if (!raw) { return; }
      var saved = JSON.parse(raw);
      state = saved.state || {};
      reviewerBox.value = saved.reviewer || "";
      cur = Math.min(Math.max(0, saved.cur || 0), items.length - 1);
    } catch (e) { state = {}; }
  }
  function labelled() { return items.filter(function (it) { var s = state[it.item_id]; return s && s.label; }).length; }
  function flash(text) { var m = document.getElementById("msg"); m.textContent = text; setTimeout(function () { if (m.textContent === text) { m.textContent = ""; } }, 4000); }

  function setLabel(value) {
    var it = items[cur];
    var s = state[it.item_id] || (state[it.item_id] = {label: "", note: ""});
    s.label = (s.label === value) ? "" : value;
    dirty = true; save(); render();
    if (s.label) { setTimeout(function () { go(cur + 1); }, 150); }
  }
  function go(i) { if (i >= 0 && i < items.length) { cur = i; save(); render(); window.scrollTo(0, 0); } }
  function nextOpen() {
    for (var k = 1; k <= items.length; k++) {
      var i = (cur + k) % items.length, s = state[items[i].item_id];
      if (!s || !s.label) { go(i); return; }
    }
    flash("every item is labelled: download your labels");
  }

  function chunks(list) {
    var box = el("div");
    (list || []).forEach(function (c) {
      var d = el("div", "chunk");
      d.appendChild(el("b", null, "[" + c.id + "]"));
      d.appendChild(el("div", "text", c.text));
      box.appendChild(d);
    });
    return box;
  }

  function render() {
    var n = labelled();
    document.getElementById("bar").style.width = (items.length ? 100 * n / items.length : 0) + "%";
    document.getElementById("count").textContent = n + " / " + items.length + " labelled";
    var nav = document.getElementById("list");
    nav.textContent = "";
    items.forEach(function (it, i) {
      var a = el("a", (i === cur ? "cur " : "") + ((state[it.item_id] || {}).label ? "done" : ""), it.item_id);
      a.onclick = function () { go(i); };
      nav.appendChild(a);
    });
    var it = items[cur], s = state[it.item_id] || {label: "", note: ""};
    var sec = document.getElementById("item");
    sec.textContent = "";
    var head = el("div", "card");
    head.appendChild(el("div", "meta", "Item " + (cur + 1) + " of " + items.length + " · " + it.item_id +
                        " · " + ({pairwise: "which answer is better", claim: "is the claim supported",
                                  coverage: "is the key point covered", abstention: "does it answer the question asked"}[it.kind] || it.kind) +
                        " · case " + it.case_id));
    head.appendChild(el("h2", "text", it.question));
    head.appendChild(el("div", "meta", it.task));
    sec.appendChild(head);
    if (it.kind === "pairwise") {
      var row = el("div", "answers");
      [["Answer 1", it.answer_1], ["Answer 2", it.answer_2]].forEach(function (p) {
        var c = el("div", "card"); c.appendChild(el("h3", null, p[0])); c.appendChild(el("div", "text", p[1])); row.appendChild(c);
      });
      sec.appendChild(row);
    } else if (it.kind === "claim") {
      var cl = el("div", "card claim"); cl.appendChild(el("div", "meta", "Claim")); cl.appendChild(el("div", "text", it.claim)); sec.appendChild(cl);
      var det = el("details", "card"); det.appendChild(el("summary", null, "The answer this claim was taken from"));
      det.appendChild(el("div", "text", it.answer)); sec.appendChild(det);
    } else {
      if (it.kind === "coverage") {
        var kp = el("div", "card claim"); kp.appendChild(el("div", "meta", "Key point")); kp.appendChild(el("div", "text", it.key_point)); sec.appendChild(kp);
      }
      var an = el("div", "card"); an.appendChild(el("h3", null, "Answer")); an.appendChild(el("div", "text", it.answer)); sec.appendChild(an);
    }
    var lab = el("div", "card");
    var btns = el("div", "labels");
    var names = {"1": "Answer 1 is better", "2": "Answer 2 is better", "tie": "Tie / no preference",
                 "supported": "Supported", "unsupported": "Unsupported",
                 "covered": "Covered", "not_covered": "Not covered",
                 "abstained": "Abstained", "answered": "Answered"};
    var keys = {"1": "1", "2": "2", "tie": "t", "supported": "s", "unsupported": "u",
                "covered": "c", "not_covered": "x", "abstained": "a", "answered": "w"};
    allowed(it).forEach(function (v) {
      var b = el("button", s.label === v ? "chosen" : "", (names[v] || v) + " ");
      b.appendChild(el("kbd", null, keys[v] || ""));
      b.onclick = function () { setLabel(v); };
      btns.appendChild(b);
    });
    var prev = el("button", null, "\u2190 Prev"); prev.onclick = function () { go(cur - 1); };
    var next = el("button", null, "Next \u2192"); next.onclick = function () { go(cur + 1); };
    btns.appendChild(el("span", "grow")); btns.appendChild(prev); btns.appendChild(next);
    lab.appendChild(btns);
    var note = el("textarea"); note.placeholder = "optional note (why?)"; note.value = s.note || "";
    note.oninput = function () {
      var st = state[it.item_id] || (state[it.item_id] = {label: "", note: ""});
      st.note = note.value; dirty = true; save();
    };
    lab.appendChild(note);
    sec.appendChild(lab);
    var ctx = el("details", "card"); ctx.open = true;
    ctx.appendChild(el("summary", null, "Retrieved context (" + (it.context || []).length + " chunks)"));
    ctx.appendChild(chunks(it.context));
    sec.appendChild(ctx);
  }

  function download() {
    var who = reviewerBox.value.trim();
    if (!who) { flash("enter your name as reviewer first"); reviewerBox.focus(); return; }
    var payload = buildPayload(pack, state, who);
    if (!payload.labels.length) { flash("nothing labelled yet"); return; }
    var blob = new Blob([JSON.stringify(payload, null, 1) + "\n"], {type: "application/json"});
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "labels-" + pack.pack_id + "-" + who.replace(/[^A-Za-z0-9_.-]+/g, "_") + ".json";
    document.body.appendChild(a); a.click(); document.body.removeChild(a);
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 1000);
    dirty = false;
    flash("saved " + payload.labels.length + " label(s): run `abtest review import RUN_ID " + a.download + "`");
  }

  function load(file) {
    var rd = new FileReader();
    rd.onload = function () {
      try {
        var doc = JSON.parse(rd.result);
        if (doc.format !== FORMAT || !Array.isArray(doc.labels)) { throw new Error("not a labels file from this page"); }
        var known = {}, k = 0;
        items.forEach(function (it) { known[it.item_id] = it; });
        doc.labels.forEach(function (l) {
          var it = known[l.item_id];
          if (it && allowed(it).indexOf(l.label) >= 0) { state[l.item_id] = {label: l.label, note: l.note || ""}; k++; }
        });
        if (doc.reviewer && !reviewerBox.value) { reviewerBox.value = doc.reviewer; }
        save(); render(); flash("loaded " + k + " label(s)");
      } catch (e) { flash("could not load: " + e.message); }
    };
    rd.readAsText(file);
  }

  var reviewerBox = document.getElementById("reviewer");
  document.getElementById("packid").textContent = "pack " + pack.pack_id;
  reviewerBox.oninput = save;
  document.getElementById("download").onclick = download;
  document.getElementById("next-open").onclick = nextOpen;
  document.getElementById("load").onclick = function () { document.getElementById("file").click(); };
  document.getElementById("file").onchange = function (e) { if (e.target.files[0]) { load(e.target.files[0]); } e.target.value = ""; };
  document.addEventListener("keydown", function (e) {
    var t = e.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var it = items[cur], map = {"1": "1", "2": "2", "t": "tie", "s": "supported", "u": "unsupported",
                                 "c": "covered", "x": "not_covered", "a": "abstained", "w": "answered"};
    var v = map[e.key.toLowerCase()];
    if (v && allowed(it).indexOf(v) >= 0) { setLabel(v); e.preventDefault(); }
    else if (e.key === "ArrowRight" || e.key === "j") { go(cur + 1); }
    else if (e.key === "ArrowLeft" || e.key === "k") { go(cur - 1); }
    else if (e.key === "n") { nextOpen(); }
  });
  window.addEventListener("beforeunload", function (e) { if (dirty) { e.preventDefault(); e.returnValue = ""; } });
  restore();
  render();
})(typeof window !== "undefined" ? window : globalThis);
