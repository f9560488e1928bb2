// Draws the MFU and goodput pages' charts from the figures the server embedded with
// json_script (the run_detail.js pattern).
(function () {
  "use strict";
  var node = document.getElementById("charts-data");
  if (!node || typeof Plotly === "undefined") { return; }
  var charts = JSON.parse(node.textContent);
  charts.forEach(function (chart) {
    var target = document.getElementById(chart.id);
    if (!target) { return; }
    Plotly.newPlot(target, chart.figure.data, chart.figure.layout,
      { responsive: true, displaylogo: false });
  });
})();
