// torchspec ui: live updates without a reload. No library, no build step; every value from the server is
// put in the page as text (textContent), never as HTML.
"use strict";

const POLL_MS = 1500;

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function stateCell(tr, state) { return cell(tr, state, "state state-" + state); }

// ---------------------------------------------------------------- the apps page

function appsPage() {
  const body = document.getElementById("apps");
  const filter = document.getElementById("filter");
  const stateFilter = document.getElementById("state-filter");
  const sweepsBox = document.getElementById("sweeps");
  let rows = [];

  function render() {
    const text = filter.value.toLowerCase();
    const state = stateFilter.value;
    const fragment = document.createDocumentFragment();
    let shown = 0;
    for (const a of rows) {
      const hay = [a.handle, a.name, a.scheduler, a.user, a.provenance, a.state, a.sweep].join(" ").toLowerCase();
      if ((state && a.state !== state) || (text && !hay.includes(text))) continue;
      const tr = document.createElement("tr");
      tr.dataset.state = a.state;
      const link = document.createElement("a");
      link.href = "/app/" + encodeURIComponent(a.handle);
      link.textContent = a.handle;
      cell(tr, "").appendChild(link);
      cell(tr, a.name); cell(tr, a.scheduler); stateCell(tr, a.state);
      cell(tr, a.age); cell(tr, a.user); cell(tr, a.provenance); cell(tr, a.sweep);
      fragment.appendChild(tr);
      shown++;
    }
    body.replaceChildren(fragment);
    document.getElementById("count").textContent = shown + " of " + rows.length + " apps";
    renderSweeps();
  }

  // one line per sweep: its apps by state; a click shows its apps alone
  function renderSweeps() {
    const counts = new Map();
    for (const a of rows) {
      if (!a.sweep) continue;
      if (!counts.has(a.sweep)) counts.set(a.sweep, new Map());
      const byState = counts.get(a.sweep);
      byState.set(a.state, (byState.get(a.state) || 0) + 1);
    }
    const fragment = document.createDocumentFragment();
    for (const [sweep, byState] of counts) {
      let total = 0;
      for (const n of byState.values()) total += n;
      const states = Array.from(byState).sort((x, y) => y[1] - x[1]).map(([s, n]) => n + " " + s).join(", ");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sweep";
      button.dataset.sweep = sweep;
      button.textContent = "sweep " + sweep + ": " + total + " apps (" + states + ")";
      fragment.appendChild(button);
    }
    sweepsBox.replaceChildren(fragment);
  }

  function showErrors(schedulers) {
    const box = document.getElementById("scheduler-errors");
    for (const s of schedulers) {
      let p = Array.from(box.children).find((e) => e.dataset.scheduler === s.name);
      if (!p) { p = document.createElement("p"); p.className = "error sched-error"; p.dataset.scheduler = s.name; box.appendChild(p); }
      p.textContent = s.error || "";
      p.hidden = !s.error;
    }
  }

  async function poll() {
    try {
      const r = await fetch("/api/apps", {headers: {Accept: "application/json"}});
      if (r.ok) {
        const data = await r.json();
        rows = data.schedulers.flatMap((s) => s.apps);
        showErrors(data.schedulers);
        render();
        document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      }
    } catch (e) { document.getElementById("updated").textContent = "the server does not answer"; }
    setTimeout(poll, POLL_MS);
  }

  filter.addEventListener("input", render);
  stateFilter.addEventListener("change", render);
  sweepsBox.addEventListener("click", (e) => {
    const button = e.target.closest("button.sweep");
    if (button) { filter.value = button.dataset.sweep; render(); }
  });
  poll();
}

// ---------------------------------------------------------------- one app's page

function appPage() {
  const ds = document.body.dataset;
  let terminal = false;

  async function pollStatus() {
    try {
      const r = await fetch(ds.statusUrl, {headers: {Accept: "application/json"}});
      if (r.ok) {
        const s = await r.json();
        const st = document.getElementById("app-state");
        st.textContent = s.state; st.className = "state state-" + s.state;
        document.getElementById("app-msg").textContent = s.msg;
        const fragment = document.createDocumentFragment();
        for (const role of s.roles) for (const x of role.replicas) {
          const tr = document.createElement("tr");
          cell(tr, role.role); cell(tr, x.id); stateCell(tr, x.state); cell(tr, x.exit_code);
          cell(tr, x.restarts); cell(tr, x.host); cell(tr, x.error);
          fragment.appendChild(tr);
        }
        document.getElementById("replicas").replaceChildren(fragment);
        const cancel = document.getElementById("cancel");
        if (cancel) cancel.disabled = s.terminal;
        terminal = s.terminal;
      }
    } catch (e) { /* the next poll tries again */ }
    if (!terminal) setTimeout(pollStatus, POLL_MS);
  }
  pollStatus();
  logs(ds);
}

function logs(ds) {
  const pre = document.getElementById("log");
  const more = document.getElementById("log-more");
  const status = document.getElementById("log-status");
  const errorBox = document.getElementById("log-error");
  const replica = document.getElementById("log-replica");
  let source = null;
  let first = 0;  // the number of the first line shown

  function query(extra) {
    const p = new URLSearchParams();
    const regex = document.getElementById("log-regex").value;
    const since = document.getElementById("log-since").value;
    if (regex) p.set("regex", regex);
    if (since) p.set("since", since);
    for (const k in extra) p.set(k, extra[k]);
    return p.toString();
  }

  function showError(text) { errorBox.textContent = text; errorBox.hidden = !text; }

  function append(lines) {
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.appendChild(document.createTextNode(lines.map((l) => l + "\n").join("")));
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function open() {
    if (source) source.close();
    if (!replica.value) return;
    pre.textContent = ""; showError(""); more.hidden = true; first = 0;
    const follow = document.getElementById("log-follow").checked;
    const url = ds.logsUrl + replica.value + "?" + query({follow: follow ? "1" : "0"});
    status.textContent = "loading...";
    source = new EventSource(url);
    let seen = false;
    source.addEventListener("lines", (e) => {
      const d = JSON.parse(e.data);
      if (!seen) { seen = true; first = d.start; more.hidden = d.start === 0; }
      append(d.lines);
      status.textContent = follow ? "following" : "";
    });
    source.addEventListener("failure", (e) => showError(JSON.parse(e.data).error));
    source.addEventListener("end", () => { source.close(); status.textContent = "end of the log"; });
    source.onerror = async () => {
      if (source.readyState !== EventSource.CLOSED) return;  // the browser reconnects by itself
      try {
        const r = await fetch(url, {headers: {Accept: "application/json"}});
        if (!r.ok) showError((await r.json()).error);
      } catch (e) { showError("the server does not answer"); }
      status.textContent = "";
    };
  }

  more.addEventListener("click", async () => {
    const r = await fetch(ds.olderUrl + replica.value + "?" + query({before: String(first)}),
                          {headers: {Accept: "application/json"}});
    const d = await r.json();
    if (!r.ok) { showError(d.error); return; }
    const height = pre.scrollHeight;
    pre.insertBefore(document.createTextNode(d.lines.map((l) => l + "\n").join("")), pre.firstChild);
    pre.scrollTop += pre.scrollHeight - height;
    first = d.start;
    more.hidden = first === 0;
  });
  document.getElementById("log-apply").addEventListener("click", open);
  replica.addEventListener("change", open);
  document.getElementById("log-follow").addEventListener("change", open);
  for (const id of ["log-regex", "log-since"]) {
    document.getElementById(id).addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
  }
  open();
}

// ---------------------------------------------------------------- confirmations, start

document.addEventListener("submit", (e) => {
  const text = e.target.dataset && e.target.dataset.confirm;
  if (text && !window.confirm(text)) e.preventDefault();
});

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "apps") appsPage();
  if (document.body.dataset.page === "app") appPage();
});
