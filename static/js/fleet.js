// Draws the SDC ledger and fleet pages' charts from the figures embedded with json_script.
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
