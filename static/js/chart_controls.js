// The compare page's chart controls: log y, clip outliers (on unless the link says yclip=0)
// and smoothing, read from and kept in the link by charts.js, as on the run page.
(function () {
  "use strict";
  var charts = window.ChronicleCharts;
  if (!charts) { return; }
  var log = document.getElementById("y-log");
  var clip = document.getElementById("y-clip");
  var smoothing = document.getElementById("smoothing");
  var reset = document.getElementById("reset-zoom");
  if (!log || !clip || !smoothing) { return; }
  var params = new URLSearchParams(window.location.search);
  log.checked = params.get("ylog") === "1";
  clip.checked = params.get("yclip") !== "0";
  smoothing.value = params.get("smooth") || "0";
  log.addEventListener("change", function () { charts.setLog(log.checked); });
  clip.addEventListener("change", function () { charts.setClip(clip.checked); });
  smoothing.addEventListener("change", function () { charts.setSmoothing(Number(smoothing.value)); });
  if (reset) { reset.addEventListener("click", function () { charts.applyX(null); }); }
})();
