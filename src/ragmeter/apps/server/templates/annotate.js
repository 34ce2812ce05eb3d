// The annotation page: reads the rater's token from the URL fragment (never sent to the server
// in a URL), loads the rater's items, and saves each label as it is chosen.
(function () {
  "use strict";
  var token = decodeURIComponent((location.hash || "").slice(1));
  var state = { items: [], scales: [], pos: 0, scale: 0 };
  var $ = function (id) { return document.getElementById(id); };

  function showError(msg) { var e = $("error"); e.textContent = msg; e.hidden = false; }
  function complete(item) {
    return state.scales.every(function (s) { return item.labels[s.name] !== undefined; });
  }
  function progress() {
    var done = state.items.filter(complete).length, n = state.items.length;
    $("progress").textContent = done + " / " + n;
    $("progress-fill").style.width = (n ? 100 * done / n : 0) + "%";
    $("done").hidden = done !== n || n === 0;
  }
  function setText(id, value) {
    $("f-" + id).hidden = value === null || value === undefined;
    $(id).textContent = value || "";
  }
  function render() {
    var item = state.items[state.pos];
    $("item").hidden = false;
    $("position").textContent = "item " + (state.pos + 1) + " of " + state.items.length;
    $("item").dataset.sampleId = item.sample_id;
    setText("question", item.question);
    setText("answer", item.answer);
    setText("reference", item.reference);
    var ctx = $("contexts"); ctx.textContent = "";
    $("f-contexts").hidden = !item.contexts.length;
    item.contexts.forEach(function (c, i) {
      var d = document.createElement("div"); d.className = "ctx";
      d.textContent = "[" + (i + 1) + "] " + c; ctx.appendChild(d);
    });
    var box = $("scales"); box.textContent = "";
    state.scales.forEach(function (s, si) {
      var row = document.createElement("div");
      row.className = "scale" + (si === state.scale ? " current" : "");
      row.dataset.scale = s.name;
      var name = document.createElement("span"); name.className = "name"; name.textContent = s.name;
      row.appendChild(name);
      s.values.forEach(function (v, vi) {
        var b = document.createElement("button");
        b.type = "button"; b.textContent = s.kind === "binary" ? (v === "1" ? "1 yes" : "0 no") :
          (s.kind === "categorical" ? (vi + 1) + " " + v : v);
        b.dataset.value = v;
        if (item.labels[s.name] === v) b.className = "chosen";
        b.addEventListener("click", function () { state.scale = si; choose(v); });
        row.appendChild(b);
      });
      box.appendChild(row);
    });
    progress();
  }
  function save(item, scale, value) {
    $("status").textContent = "saving…";
    return fetch("/annotate/api/labels", {
      method: "POST", credentials: "omit",
      headers: { "Content-Type": "application/json", "X-Annotate-Token": token },
      body: JSON.stringify({ sample_id: item.sample_id, scale: scale, value: value })
    }).then(function (r) {
      if (!r.ok) return r.json().then(function (b) { throw new Error(b.detail || r.status); });
      $("status").textContent = "saved";
    }).catch(function (e) {
      delete item.labels[scale]; render();
      showError("not saved: " + e.message);
    });
  }
  function choose(value) {
    var item = state.items[state.pos], s = state.scales[state.scale];
    item.labels[s.name] = value;
    save(item, s.name, value);
    if (state.scale < state.scales.length - 1) { state.scale += 1; render(); }
    else if (complete(item) && state.pos < state.items.length - 1) { go(state.pos + 1); }
    else { render(); }
  }
  function go(pos) {
    state.pos = Math.max(0, Math.min(state.items.length - 1, pos));
    state.scale = 0;
    render();
  }
  function keyValue(key) {
    var s = state.scales[state.scale];
    if (s.kind === "categorical") { var i = parseInt(key, 10) - 1; return s.values[i]; }
    return s.values.indexOf(key) >= 0 ? key : undefined;
  }
  document.addEventListener("keydown", function (ev) {
    if (!state.items.length || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "ArrowRight" || ev.key === "Enter") { go(state.pos + 1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft") { go(state.pos - 1); ev.preventDefault(); }
    else if (ev.key === "ArrowDown") { state.scale = Math.min(state.scales.length - 1, state.scale + 1); render(); ev.preventDefault(); }
    else if (ev.key === "ArrowUp") { state.scale = Math.max(0, state.scale - 1); render(); ev.preventDefault(); }
    else if (/^[0-9]$/.test(ev.key)) {
      var v = keyValue(ev.key);
      if (v !== undefined) { choose(v); ev.preventDefault(); }
    }
  });
  $("prev").addEventListener("click", function () { go(state.pos - 1); });
  $("next").addEventListener("click", function () { go(state.pos + 1); });

  if (!token) { showError("This page needs your personal link (…/annotate#TOKEN)."); return; }
  fetch("/annotate/api/session", { headers: { "X-Annotate-Token": token }, credentials: "omit" })
    .then(function (r) {
      if (!r.ok) return r.json().then(function (b) { throw new Error(b.detail || r.status); });
      return r.json();
    })
    .then(function (data) {
      state.items = data.items; state.scales = data.scales;
      $("who").textContent = data.rater + " — task " + (data.name || data.task);
      $("rubric").textContent = data.rubric;
      if (!state.items.length) { showError("This task has no items."); return; }
      var first = state.items.findIndex(function (it) { return !complete(it); });
      go(first < 0 ? 0 : first);
      document.body.dataset.ready = "1";
    })
    .catch(function (e) { showError(e.message); });
})();
