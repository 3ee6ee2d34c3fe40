// vidforge's pages: the live parts and the countdown. No framework, no external code.
"use strict";

// Elements with data-live="URL" are refreshed from that URL (a server-rendered fragment)
// every second until the fragment says data-final="true". data-keyed="true" (the dashboard's
// rows) replaces only the rows whose data-version changed, so videos do not reload.
function refresh(el) {
  const url = el.dataset.live;
  const keyed = el.dataset.keyed === "true";
  fetch(url, { credentials: "same-origin", cache: "no-store" })
    .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
    .then((text) => {
      const tpl = document.createElement("template");
      tpl.innerHTML = text.trim();
      if (keyed) {
        const old = new Map([...el.children].map((row) => [row.dataset.renderId, row]));
        const rows = [...tpl.content.children];
        rows.forEach((row, i) => {
          const prev = old.get(row.dataset.renderId);
          const keep = prev && prev.dataset.version === row.dataset.version;
          const node = keep ? prev : row;
          if (el.children[i] !== node) el.insertBefore(node, el.children[i] || null);
          if (prev && !keep) prev.remove();
          old.delete(row.dataset.renderId);
        });
        old.forEach((row) => row.remove());
        setTimeout(() => refresh(el), 2000);
        return;
      }
      const next = tpl.content.firstElementChild;
      if (!next) return;
      // The decision was made elsewhere (another tab, the agent): show the decided page.
      if (document.getElementById("decide") && next.dataset.state !== "awaiting_watermark_approval") {
        location.reload();
        return;
      }
      el.replaceWith(next);
      if (next.dataset.final !== "true") setTimeout(() => refresh(next), 1000);
    })
    .catch(() => setTimeout(() => refresh(el), 3000));
}

function countdown() {
  const el = document.getElementById("time-left");
  if (!el) return;
  const deadline = Number(el.dataset.deadline);
  const tick = () => {
    const left = Math.max(0, Math.floor((deadline - Date.now()) / 1000));
    const m = Math.floor(left / 60), s = left % 60;
    el.textContent = left === 0 ? "no time" : (m > 0 ? `${m} min ${s} s` : `${s} s`);
    if (left > 0) setTimeout(tick, 1000);
  };
  tick();
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach((el) => {
    if (el.dataset.final !== "true") setTimeout(() => refresh(el), 1000);
  });
  countdown();
});
