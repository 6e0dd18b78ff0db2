// The demo status page's scenario toggles (infrapulse.health.page). Served by the daemon at
// /static/scenarios.js; the page's Content-Security-Policy runs same-origin scripts only, so
// there is no inline handler. A click POSTs the JSON the scenarios API takes, then reloads.
"use strict";

for (const button of document.querySelectorAll("button.scenario")) {
  button.addEventListener("click", async () => {
    const active = button.dataset.active !== "true";
    button.disabled = true;
    const response = await fetch("/api/v1/scenarios", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({name: button.dataset.scenario, active: active}),
    });
    if (!response.ok) {
      button.textContent += ` (failed: HTTP ${response.status})`;
      button.disabled = false;
      return;
    }
    window.location.reload();
  });
}
