/* ragmeter report: draws the charts from the page's JSON block and makes the tables sortable,
   filterable and (in the one-file report) expandable. No dependency besides plotly.js. */
(function () {
  "use strict";

  function drawFigures() {
    var block = document.getElementById("rm-figures");
    if (!block || typeof window.Plotly === "undefined") { return; }
    var figures = JSON.parse(block.textContent || "{}");
    Object.keys(figures).forEach(function (id) {
      var div = document.getElementById(id);
      if (!div) { return; }
      var f = figures[id];
      window.Plotly.newPlot(div, f.data, f.layout, f.config || { responsive: true, displaylogo: false });
    });
  }

  // a table row and the detail row that follows it move and hide together
  function rowGroups(tbody) {
    var out = [];
    Array.prototype.forEach.call(tbody.rows, function (r) {
      if (r.classList.contains("rm-detail")) {
        if (out.length) { out[out.length - 1].rows.push(r); }
      } else {
        out.push({ rows: [r] });
      }
    });
    return out;
  }

  function sortKey(row, index, type) {
    var cell = row.cells[index];
    if (!cell) { return null; }
    var v = cell.getAttribute("data-value");
    if (v === null) { v = cell.textContent.trim(); }
    if (type === "num") {
      if (v === "") { return null; }
      var n = parseFloat(v);
      return isNaN(n) ? null : n;
    }
    return v.toLowerCase();
  }

  function sortTable(table, th) {
    var type = th.getAttribute("data-sort");
    var index = th.cellIndex;
    var ascending = !th.classList.contains("sorted-asc");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) {
      c.classList.remove("sorted-asc", "sorted-desc");
      c.removeAttribute("aria-sort");
    });
    th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var tbody = table.tBodies[0];
    var groups = rowGroups(tbody);
    groups.forEach(function (g, i) { g.key = sortKey(g.rows[0], index, type); g.pos = i; });
    groups.sort(function (a, b) {
      // rows without a value stay at the bottom whichever the direction
      if (a.key === null || b.key === null) {
        return a.key === b.key ? a.pos - b.pos : (a.key === null ? 1 : -1);
      }
      var c = type === "num" ? a.key - b.key
        : a.key.localeCompare(b.key, undefined, { numeric: true, sensitivity: "base" });
      if (c === 0) { return a.pos - b.pos; }
      return ascending ? c : -c;
    });
    var frag = document.createDocumentFragment();
    groups.forEach(function (g) { g.rows.forEach(function (r) { frag.appendChild(r); }); });
    tbody.appendChild(frag);
  }

  function applyFilter(tableId) {
    var table = document.getElementById(tableId);
    if (!table) { return; }
    var sel = '[data-table="' + CSS.escape(tableId) + '"]';
    var input = document.querySelector(".rm-filter" + sel);
    var bandSelect = document.querySelector(".rm-band-filter" + sel);
    var count = document.querySelector(".rm-count" + sel);
    var terms = (input ? input.value : "").toLowerCase().split(/\s+/).filter(Boolean);
    var band = bandSelect ? bandSelect.value : "";
    var shown = 0;
    var groups = rowGroups(table.tBodies[0]);
    groups.forEach(function (g) {
      var row = g.rows[0];
      var text = row.textContent.toLowerCase();
      var ok = terms.every(function (t) { return text.indexOf(t) !== -1; }) &&
        (!band || row.getAttribute("data-band") === band);
      row.hidden = !ok;
      g.rows.slice(1).forEach(function (d) { d.hidden = !ok || !row.classList.contains("open"); });
      if (ok) { shown += 1; }
    });
    if (count) {
      var base = count.getAttribute("data-total-text");
      if (base === null) { base = count.textContent; count.setAttribute("data-total-text", base); }
      count.textContent = (terms.length || band) ? shown + " shown of " + base : base;
    }
  }

  function toggleDetail(row) {
    var detail = row.nextElementSibling;
    if (!detail || !detail.classList.contains("rm-detail")) { return; }
    var open = !row.classList.contains("open");
    row.classList.toggle("open", open);
    detail.hidden = !open;
  }

  function init() {
    document.querySelectorAll("table.rm-sortable").forEach(function (table) {
      if (!table.tHead) { return; }
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        if (!th.hasAttribute("data-sort")) { return; }
        th.tabIndex = 0;
        th.addEventListener("click", function () { sortTable(table, th); });
        th.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, th); }
        });
      });
    });
    document.querySelectorAll(".rm-filter, .rm-band-filter").forEach(function (el) {
      el.addEventListener("input", function () { applyFilter(el.getAttribute("data-table")); });
      el.addEventListener("change", function () { applyFilter(el.getAttribute("data-table")); });
    });
    document.querySelectorAll("tr.rm-expandable").forEach(function (row) {
      row.addEventListener("click", function (e) {
        if (e.target.closest("a, button, input, summary")) { return; }
        if (window.getSelection && String(window.getSelection()).length) { return; }
        toggleDetail(row);
      });
    });
    drawFigures();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
