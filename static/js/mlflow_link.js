// MLflow prints a run's link as <tracking URI>/#/experiments/<id>/runs/<id>. The part after
// "#" never reaches the server, so this page reads it and asks Chronicle for the run's page.
(function () {
  "use strict";
  var match = /^#\/experiments\/([^/?#]+)(?:\/runs\/([0-9A-Za-z]+))?/.exec(window.location.hash);
  var landing = document.getElementById("mlflow-landing");
  if (!match || !landing) {
    return; // no run in the link: the page says where to look instead
  }
  var params = new URLSearchParams({ experiment: decodeURIComponent(match[1]) });
  if (match[2]) {
    params.set("run", match[2]);
  }
  window.location.replace(landing.dataset.openUrl + "?" + params.toString());
})();
