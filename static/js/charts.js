// Draws a page's Plotly charts from the figures the server embedded (telemetry.charts.charts_script:
// a list of {"id", "figure"} in #charts-data). Every chart page uses this one file.
(function () {
  "use strict";
  var node = document.getElementById("charts-data");
  if (!node || typeof Plotly === "undefined") { return; }
  JSON.parse(node.textContent).forEach(function (chart) {
    var target = document.getElementById(chart.id);
    if (!target) { return; }
    Plotly.newPlot(target, chart.figure.data, chart.figure.layout,
      { responsive: true, displaylogo: false });
  });
})();
