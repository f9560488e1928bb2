// Draws the failure breakdown and checkpoint pages' charts from the figures the server
// embedded with json_script (a list of {"id", "figure"}).
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
