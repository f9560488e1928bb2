// Shows <time class="local" datetime="ISO"> values in the reader's time zone (stored UTC).
(function () {
  "use strict";
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  document.querySelectorAll("time.local[datetime]").forEach(function (node) {
    var moment = new Date(node.getAttribute("datetime"));
    if (isNaN(moment.getTime())) { return; }
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";
    node.title = node.textContent;  // keep the UTC reading on hover
    node.textContent = moment.getFullYear() + "-" + pad(moment.getMonth() + 1) + "-" +
      pad(moment.getDate()) + " " + pad(moment.getHours()) + ":" + pad(moment.getMinutes()) +
      " " + zone;
  });
})();
