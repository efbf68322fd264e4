"""The review page in Debian's Chromium: click through the items and download the labels."""

from __future__ import annotations

import json
import re

import pytest

from abtest import review as R
from support.review_data import RUN, _blind, _items


# Appended after the page's own script: click through items with the page's own buttons
# and keyboard handler, then press "Download labels" with URL.createObjectURL and the
# anchor's click captured (no real download). Everything observed goes into <pre id=captured>.
_DRIVER = r"""
<script id="test-driver">
(function () {
  "use strict";
  var WANT = __WANT__;                       // item_id -> blind label to give
  var names = {"1": "Answer 1 is better", "2": "Answer 2 is better", "tie": "Tie / no preference",
               "supported": "Supported", "unsupported": "Unsupported"};
  var keys = {"1": "1", "2": "2", "tie": "t", "supported": "s", "unsupported": "u"};
  var log = {seen: [], msgs: [], counts: [], download_name: null, payload: null, errors: []};
  window.addEventListener("error", function (e) { log.errors.push(String(e.message)); });
  var blobs = [];
  var realCreate = URL.createObjectURL.bind(URL);
  URL.createObjectURL = function (b) { blobs.push(b); return realCreate(b); };
  var realClick = HTMLAnchorElement.prototype.click;
  HTMLAnchorElement.prototype.click = function () {     // the download link: record, do not save
    if (this.download) { log.download_name = this.download; return; }
    return realClick.call(this);
  };

  function curId() { return document.querySelector("section#item .meta").textContent.split(" \u00b7 ")[1]; }
  function buttons() { return Array.prototype.slice.call(document.querySelectorAll("section#item .labels button")); }
  function byText(t) { return buttons().filter(function (b) { return b.textContent.indexOf(t) === 0; })[0]; }
  function msg() { return document.getElementById("msg").textContent; }
  function finish() {
    var pre = document.createElement("pre");
    pre.id = "captured";
    pre.textContent = encodeURIComponent(JSON.stringify(log));
    document.body.appendChild(pre);
  }

  var steps = [], n = 0;
  // items 1..3 by clicking the label buttons, 4..5 with the keyboard; the page advances itself
  for (var i = 0; i < 5; i++) {
    (function (useKeys) {
      steps.push(function () {
        var id = curId(), v = WANT[id];
        log.seen.push(id);
        if (useKeys) {
          document.dispatchEvent(new KeyboardEvent("keydown", {key: keys[v], bubbles: true}));
        } else {
          byText(names[v]).click();
        }
        log.counts.push(document.getElementById("count").textContent);
      });
    })(i >= 3);
  }
  steps.push(function () {                 // a sixth item: label it, go back, clear it again
    var id = curId();
    log.seen.push(id);
    byText(names[WANT[id]]).click();
  });
  steps.push(function () {
    byText("\u2190 Prev").click();
    log.after_prev = curId();
    var b = document.querySelector("section#item .labels button.chosen");
    log.chosen_before_clear = b ? b.textContent : null;
    b.click();                              // clicking the chosen label clears it
    log.counts.push(document.getElementById("count").textContent);
  });
  steps.push(function () {
    document.getElementById("list").querySelectorAll("a")[0].click();   // nav: back to the first
    log.nav_first = curId();
    log.done_links = document.querySelectorAll("nav a.done").length;
    document.getElementById("next-open").click();
    log.next_open = curId();
    document.getElementById("download").click();                          // no reviewer yet
    log.msgs.push(msg());
    var box = document.getElementById("reviewer");
    box.value = "  Grace Hopper ";
    box.dispatchEvent(new Event("input", {bubbles: true}));
    document.getElementById("download").click();
    log.msgs.push(msg());
    if (!blobs.length) { log.errors.push("no blob"); finish(); return "stop"; }
    blobs[blobs.length - 1].text().then(function (t) { log.payload = t; finish(); },
                                        function (e) { log.errors.push(String(e)); finish(); });
    return "stop";
  });
  function run() {
    try {
      if (steps[n++]() === "stop") { return; }
    } catch (e) { log.errors.push("step " + (n - 1) + ": " + e); finish(); return; }
    if (n < steps.length) { setTimeout(run, 400); } else { finish(); }
  }
  setTimeout(run, 100);
})();
</script>
"""


@pytest.mark.chromium
def test_chromium_review_page_click_through_and_download(chromium, store, tmp_path):
    """The real page in headless Chromium: label items with its buttons and keys, navigate,
    download; the captured download imports with `import_labels`."""
    R.export_pack(store, RUN, tmp_path / "pack", n=6, seed=2)
    items = _items(store)
    want = {iid: _blind(it, it["judge_label"]) for iid, it in items.items()}
    html = (tmp_path / "pack" / "review.html").read_text(encoding="utf-8")
    pack = json.loads(re.search(r'<script id="abtest-pack" type="application/json">(.*?)</script>',
                                html, re.S).group(1))
    order = [it["item_id"] for it in pack["items"]]
    driver = _DRIVER.replace("__WANT__", json.dumps(want).replace("<", "\\u003c"))
    page = tmp_path / "driven.html"
    page.write_text(html.replace("</body>", driver + "</body>"), encoding="utf-8")
    # the driver's steps run on real timers; the test waits for its result, however long a
    # loaded machine takes (a virtual-time budget ran out under load)
    with chromium.pages() as browser:
        tab = browser.new_page()
        tab.goto(page.as_uri())
        tab.wait_for_selector("#captured", state="attached", timeout=90_000)
        captured = tab.locator("#captured").text_content()
    m = re.fullmatch(r"([^<]*)", captured or "")
    assert m and captured, "driver did not finish"
    from urllib.parse import unquote

    log = json.loads(unquote(m.group(1)))
    assert log["errors"] == []
    # the page showed the items in pack order and advanced by itself after each label
    assert log["seen"] == order[:6]
    assert log["counts"][:5] == [f"{k} / {len(order)} labelled" for k in range(1, 6)]
    assert log["after_prev"] == order[5] and log["chosen_before_clear"]
    assert log["counts"][5] == f"5 / {len(order)} labelled"       # the sixth label was cleared
    assert log["nav_first"] == order[0] and log["done_links"] == 5
    assert log["next_open"] == order[5]
    assert log["msgs"][0] == "enter your name as reviewer first"
    assert log["msgs"][1].startswith("saved 5 label(s)")
    assert re.fullmatch(r"labels-[0-9a-f]{6}-[0-9a-f]{8}-Grace_Hopper\.json", log["download_name"])
    payload = json.loads(log["payload"])
    assert payload["format"] == R.DOWNLOAD_FORMAT and payload["reviewer"] == "Grace Hopper"
    assert payload["pack_id"] == pack["pack_id"]
    assert [(lab["item_id"], lab["label"]) for lab in payload["labels"]] == \
        [(i, want[i]) for i in order[:5]]
    # what the page would have saved imports, and lands in variant space
    f = tmp_path / log["download_name"]
    f.write_text(log["payload"], encoding="utf-8")
    assert R.import_labels(store, RUN, f) == 5
    stored = store.human_labels(RUN)
    assert {lab["reviewer"] for lab in stored} == {"Grace Hopper"}
    assert sorted((lab["item_id"], lab["label"]) for lab in stored) == \
        sorted((i, items[i]["judge_label"]) for i in order[:5])
    ag = R.agreement(store, RUN)
    assert "overall" not in ag  # labels of different judges are never pooled
    assert all(ag[j]["agreement"] == pytest.approx(1.0) for j in ("pairwise", "faithfulness")
               if j in ag)
