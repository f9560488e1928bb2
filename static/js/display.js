// The topbar's "Times" switch: names the browser's zone in the form and posts it on change,
// so every page is rendered in UTC or that zone (telemetry/middleware.py).
(function () {
  "use strict";
  var form = document.getElementById("tz-switch");
  if (!form) { return; }
  var zone = (Intl.DateTimeFormat().resolvedOptions().timeZone) || "UTC";
  form.elements.browser_zone.value = zone;
  var option = form.querySelector("option[value=browser]");
  if (option && !option.selected) { option.textContent = "my zone (" + zone + ")"; }
  form.elements.zone.addEventListener("change", function () { form.submit(); });
  var button = form.querySelector("button");
  if (button) { button.hidden = true; }
})();

// The date-range picker's presets (templates/_date_range.html): fill From / To in the display
// zone and apply; "whole run" (or "all") clears both. On a run's pages the presets count back
// from the run's latest data (data-end), so a stopped run's "last 24 h" is its last day.
(function () {
  "use strict";
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  document.querySelectorAll("[data-date-range]").forEach(function (box) {
    var utc = box.dataset.utc === "1";
    var write = function (d) {
      var p = utc ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes()]
                  : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes()];
      return p[0] + "-" + pad(p[1]) + "-" + pad(p[2]) + " " + pad(p[3]) + ":" + pad(p[4]);
    };
    var inputs = box.querySelectorAll("input");
    box.querySelectorAll("button[data-preset]").forEach(function (button) {
      button.addEventListener("click", function () {
        var hours = { "24h": 24, "7d": 168 }[button.dataset.preset];
        var end = box.dataset.end ? Date.parse(box.dataset.end) : Date.now();
        inputs[0].value = hours ? write(new Date(end - hours * 3600e3)) : "";
        inputs[1].value = "";
        if (box.form) { box.form.submit(); }
      });
    });
  });
})();

// Destructive forms (remove a member, revoke a token, delete an entry, release hardware from
// quarantine, disable a webhook) carry data-confirm: ask first.
document.querySelectorAll("form[data-confirm]").forEach(function (form) {
  "use strict";
  form.addEventListener("submit", function (event) {
    if (!window.confirm(form.dataset.confirm)) { event.preventDefault(); }
  });
});
