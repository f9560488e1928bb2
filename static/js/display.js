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
