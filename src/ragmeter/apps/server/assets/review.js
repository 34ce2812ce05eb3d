/* Review a golden dataset: accept / edit / reject samples, edit spans by selecting document text.
   Every piece of sample text is inserted with textContent (never as HTML). */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("review-data").textContent);
  var token = document.querySelector('meta[name="ragmeter-token"]').content;
  var samples = data.samples, i = 0, docs = {}, pendingSpan = null;
  function $(id) { return document.getElementById(id); }
  function status(text) { $("rv-status").textContent = text; }

  function loadDoc(source, cb) {
    if (!data.corpus || !source) { cb(""); return; }
    if (docs[source] !== undefined) { cb(docs[source]); return; }
    fetch("/api/corpora/" + encodeURIComponent(data.corpus) + "/documents/" + source.split("/").map(encodeURIComponent).join("/"))
      .then(function (r) { return r.ok ? r.json() : { text: "" }; })
      .then(function (j) { docs[source] = j.text || ""; cb(docs[source]); });
  }

  function renderDoc(text, spans) {
    var pre = $("rv-document");
    pre.textContent = "";
    var pos = 0;
    spans.slice().sort(function (a, b) { return a.start - b.start; }).forEach(function (sp) {
      if (sp.start < pos) return;
      pre.appendChild(document.createTextNode(text.slice(pos, sp.start)));
      var mark = document.createElement("mark");
      mark.textContent = text.slice(sp.start, sp.end);
      pre.appendChild(mark);
      pos = sp.end;
    });
    pre.appendChild(document.createTextNode(text.slice(pos)));
  }

  function show() {
    var s = samples[i];
    var done = samples.filter(function (x) { return x._review !== "pending"; }).length;
    $("rv-progress").textContent = "sample " + (i + 1) + " of " + samples.length + " · " + done + " reviewed";
    $("rv-meta").textContent = s.id + " · " + ((s.metadata || {}).type || "") + " · " + s._review;
    $("rv-card").setAttribute("data-review", s._review);
    $("rv-card").setAttribute("data-sample", s.id);
    $("rv-question").textContent = s.question || "";
    $("rv-reference").textContent = (s.references || [])[0] || "—";
    $("rv-negatives").textContent = (s.negative_references || []).join(" | ") || "—";
    $("rv-edit").hidden = true;
    $("rv-view").hidden = false;
    pendingSpan = null;
    $("rv-span-info").textContent = "";
    var spans = s.relevant || [];
    var source = spans.length ? spans[0].source : (((s.metadata || {}).passages || [])[0] || {}).source;
    $("rv-source").textContent = source || "—";
    loadDoc(source, function (text) { renderDoc(text, spans.filter(function (x) { return x.source === source; })); });
  }

  function send(action, changes) {
    var s = samples[i];
    status("saving…");
    return fetch("/api/datasets/" + encodeURIComponent(data.dataset) + "/samples/" + encodeURIComponent(s.id) + "/review", {
      method: "POST", headers: { "Content-Type": "application/json", "X-Ragmeter-Token": token },
      body: JSON.stringify({ action: action, changes: changes || null })
    }).then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
      .then(function (res) {
        if (!res[0]) { status("not saved: " + res[1].detail); return; }
        var d = res[1].data; d._review = res[1].review; samples[i] = d;
        status(s.id + ": " + res[1].review);
        if (action !== "edit" && i < samples.length - 1) { i += 1; }
        show();
      });
  }

  function selectionOffsets() {
    var sel = window.getSelection(), pre = $("rv-document");
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null;
    var range = sel.getRangeAt(0);
    if (!pre.contains(range.startContainer) || !pre.contains(range.endContainer)) return null;
    var before = document.createRange();
    before.selectNodeContents(pre);
    before.setEnd(range.startContainer, range.startOffset);
    var start = before.toString().length;
    return { start: start, end: start + range.toString().length };
  }

  function startEdit() {
    var s = samples[i];
    $("rv-edit-question").value = s.question || "";
    $("rv-edit-references").value = (s.references || []).join("\n");
    $("rv-view").hidden = true;
    $("rv-edit").hidden = false;
    $("rv-edit-question").focus();
  }

  $("rv-use-selection").addEventListener("click", function () {
    var off = selectionOffsets();
    if (!off) { $("rv-span-info").textContent = "select text in the document first"; return; }
    pendingSpan = { source: $("rv-source").textContent, start: off.start, end: off.end };
    $("rv-span-info").textContent = "characters " + off.start + "–" + off.end;
  });
  $("rv-edit").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var changes = { question: $("rv-edit-question").value.trim(),
                    references: $("rv-edit-references").value.split("\n").map(function (x) { return x.trim(); }).filter(Boolean) };
    if (pendingSpan) changes.relevant = [pendingSpan];
    send("edit", changes);
  });
  $("rv-cancel").addEventListener("click", show);
  $("rv-accept").addEventListener("click", function () { send("accept"); });
  $("rv-reject").addEventListener("click", function () { send("reject"); });
  $("rv-edit-button").addEventListener("click", startEdit);
  $("rv-next").addEventListener("click", function () { if (i < samples.length - 1) { i += 1; show(); } });
  $("rv-prev").addEventListener("click", function () { if (i > 0) { i -= 1; show(); } });
  document.addEventListener("keydown", function (ev) {
    if (ev.target.tagName === "TEXTAREA" || ev.target.tagName === "INPUT" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var k = ev.key;
    if (k === "a") send("accept");
    else if (k === "r") send("reject");
    else if (k === "e") { ev.preventDefault(); startEdit(); }
    else if (k === "j") $("rv-next").click();
    else if (k === "k") $("rv-prev").click();
  });
  if (samples.length) show(); else status("this dataset has no sample");
})();
