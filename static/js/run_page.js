// The run page's controls, none of which reloads the page: the metric picker (search, sections,
// pinned metrics kept in ?metrics=), the step / wall-clock switch, log scale, smoothing and
// reset zoom. A change rewrites the URL and swaps the charts in (live.js fetches the page).
(function () {
  "use strict";
  var picker = document.getElementById("metric-picker");
  if (!picker) { return; }
  var search = document.getElementById("metric-search");

  function go(params) {
    var query = params.toString();
    window.history.pushState(null, "", window.location.pathname + (query ? "?" + query : ""));
    return window.ChronicleLive.refresh().then(syncControls);
  }
  function syncControls() {
    var drawn = {};
    document.querySelectorAll("#charts-area [data-metric]").forEach(function (el) { drawn[el.dataset.metric] = true; });
    picker.querySelectorAll("input[name=metric]").forEach(function (box) { box.checked = !!drawn[box.value]; });
    // The summary sits outside the swapped charts: count what is drawn now.
    document.getElementById("metric-drawn-count").textContent = String(Object.keys(drawn).length);
    var axis = new URLSearchParams(window.location.search).get("axis") === "time" ? "time" : "step";
    document.querySelectorAll("#axis-switch a").forEach(function (a) { a.classList.toggle("current", a.dataset.axis === axis); });
  }

  search.addEventListener("input", function () {
    var needle = search.value.trim().toLowerCase();
    picker.querySelectorAll(".metric-section").forEach(function (section) {
      var matches = 0;
      section.querySelectorAll("li").forEach(function (li) {
        var hit = !needle || li.textContent.toLowerCase().indexOf(needle) !== -1;
        li.hidden = !hit;
        if (hit) { matches += 1; }
      });
      section.hidden = needle !== "" && matches === 0;
      // Collapsed by default; a search opens the sections holding what it found.
      section.open = needle !== "" && matches > 0;
    });
  });

  picker.addEventListener("change", function (event) {
    if (event.target.name !== "metric") { return; }
    var params = new URLSearchParams(window.location.search);
    var ticked = Array.prototype.map.call(picker.querySelectorAll("input[name=metric]:checked"), function (b) { return b.value; });
    // The charts drawn keep their order (the default's loss, lr... first); a newly ticked
    // metric comes after them.
    var chosen = Array.prototype.map.call(document.querySelectorAll("#charts-area [data-metric]"), function (el) { return el.dataset.metric; })
      .filter(function (name) { return ticked.indexOf(name) !== -1; });
    ticked.forEach(function (name) { if (chosen.indexOf(name) === -1) { chosen.push(name); } });
    if (chosen.length) { params.set("metrics", chosen.join(",")); } else { params.delete("metrics"); }
    go(params);
  });
  document.getElementById("metric-default").addEventListener("click", function () {
    var params = new URLSearchParams(window.location.search);
    params.delete("metrics");
    go(params);
  });

  document.getElementById("axis-switch").addEventListener("click", function (event) {
    var link = event.target.closest("a[data-axis]");
    if (!link) { return; }
    event.preventDefault();
    var params = new URLSearchParams(window.location.search);
    params.set("axis", link.dataset.axis);
    // A zoom in steps means nothing in wall-clock time.
    params.delete("x0"); params.delete("x1");
    go(params);
  });

  var log = document.getElementById("y-log");
  var clip = document.getElementById("y-clip");
  var smoothing = document.getElementById("smoothing");
  var params = new URLSearchParams(window.location.search);
  log.checked = params.get("ylog") === "1";
  clip.checked = params.get("yclip") !== "0";
  smoothing.value = params.get("smooth") || "0";
  log.addEventListener("change", function () { window.ChronicleCharts.setLog(log.checked); });
  clip.addEventListener("change", function () { window.ChronicleCharts.setClip(clip.checked); });
  smoothing.addEventListener("change", function () { window.ChronicleCharts.setSmoothing(Number(smoothing.value)); });
  document.getElementById("reset-zoom").addEventListener("click", function () { window.ChronicleCharts.applyX(null); });
  window.addEventListener("popstate", function () { window.ChronicleLive.refresh().then(syncControls); });
})();
