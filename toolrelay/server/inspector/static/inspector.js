// The inspector's page: plain DOM, no framework. Every text from a request is
// set with textContent, never parsed as HTML.
"use strict";

const view = document.getElementById("view");
const tokenInput = document.getElementById("token");
const liveBadge = document.getElementById("live");
tokenInput.value = sessionStorage.getItem("toolrelay-token") || "";
tokenInput.addEventListener("change", () => {
  sessionStorage.setItem("toolrelay-token", tokenInput.value);
  connect();
  route();
});

function headers(extra) {
  const all = Object.assign({}, extra || {});
  if (tokenInput.value) all.Authorization = "Bearer " + tokenInput.value;
  return all;
}

async function getJSON(path) {
  const answer = await fetch(path, { headers: headers() });
  const body = await answer.json();
  if (!answer.ok) throw new Error((body.error && body.error.message) || answer.statusText);
  return body;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function pretty(value) {
  if (value === null || value === undefined || value === "") return "—";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function block(title, value, testid) {
  return el("div", {}, el("h4", {}, title), el("pre", { "data-testid": testid || "" }, pretty(value)));
}

// --- the live list ------------------------------------------------------------

const rows = new Map();
let listBody = null;

function row(summary) {
  const time = new Date(summary.time * 1000).toLocaleTimeString();
  const status = summary.done ? summary.status : "running";
  return el(
    "tr",
    { "data-id": summary.id, onclick: () => { location.hash = "#/request/" + summary.id; } },
    el("td", {}, time),
    el("td", {}, summary.front),
    el("td", {}, summary.model || "—"),
    el("td", {}, summary.backend || "—"),
    el("td", { "data-testid": "path" }, summary.path || "—"),
    el("td", { class: summary.status >= 400 ? "bad" : "" }, status),
    el("td", {}, summary.duration_ms === null ? "—" : summary.duration_ms + " ms"),
    el("td", {}, summary.calls),
    el("td", { "data-testid": "repairs" }, summary.repairs),
    el("td", { class: "warn" }, summary.warning || ""),
  );
}

function upsert(summary) {
  rows.set(summary.id, summary);
  if (!listBody) return;
  const fresh = row(summary);
  const old = listBody.querySelector(`tr[data-id="${CSS.escape(summary.id)}"]`);
  if (old) old.replaceWith(fresh);
  else listBody.prepend(fresh);
}

async function showList(number) {
  const { requests } = await getJSON("/ui/api/requests");
  if (!current(number)) return;
  listBody = el("tbody", { id: "requests" });
  for (const summary of requests) {
    rows.set(summary.id, summary);
    listBody.append(row(summary));
  }
  const head = ["time", "front", "model", "backend", "path", "status", "duration", "calls", "repairs", "warning"];
  view.replaceChildren(
    el("h2", {}, "Recent requests"),
    el("table", {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))), listBody),
  );
}

// Server-sent events read with fetch, so that the token goes in a header. The
// server ends each live list after a while; the next one starts at once, and
// the list is read again for what changed in between.
let liveAbort = null;
async function connect() {
  if (liveAbort) liveAbort.abort();
  liveAbort = new AbortController();
  const signal = liveAbort.signal;
  try {
    const answer = await fetch("/ui/api/requests", {
      headers: headers({ Accept: "text/event-stream" }),
      signal,
    });
    if (!answer.ok) { liveBadge.textContent = "live list refused: " + answer.status; return; }
    liveBadge.textContent = "live";
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const message = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = message.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) upsert(JSON.parse(data));
      }
    }
  } catch (error) {
    if (signal.aborted) return;
    liveBadge.textContent = "live list lost: " + error.message + " (retrying)";
    await new Promise((resolve) => setTimeout(resolve, 3000));
  }
  if (signal.aborted) return;
  connect();
  if (listBody) route();
}

// --- one request --------------------------------------------------------------

function attemptCard(attempt, number) {
  const answer = attempt.stream
    ? block("Raw stream (ms: chunk)", attempt.chunks.map((c) => c.ms + " ms  " + JSON.stringify(c.chunk)).join("\n"), "raw-stream")
    : block("Raw answer", attempt.answer, "raw-answer");
  const parsed = attempt.parsed;
  const rejected = parsed.rejected.map((r) => `${r.name || "(no name)"}: ${r.reason}\n  ${r.raw}`).join("\n");
  return el(
    "section",
    { class: "card", "data-testid": "attempt" },
    el("h3", {}, `Attempt ${number}: ${attempt.why}`),
    el("p", {}, `${attempt.backend}, ${attempt.mode} path, ${attempt.stream ? "streamed" : "not streamed"}, ${attempt.duration_ms ?? "—"} ms`),
    attempt.error ? el("p", { class: "bad" }, "error: " + attempt.error) : null,
    el(
      "div",
      { class: "columns" },
      block("Sent to the backend", attempt.sent, "sent"),
      el("div", {}, answer, block("Model's text as written", attempt.raw, "raw-text")),
      el(
        "div",
        {},
        block("Calls", parsed.calls, "calls"),
        block("Rejected", rejected, "rejected"),
        block("Reasoning", parsed.reasoning),
        block("Content after the parser", parsed.content, "content"),
      ),
    ),
  );
}

async function showRequest(id, number) {
  const record = await getJSON("/ui/api/requests/" + encodeURIComponent(id));
  if (!current(number)) return;
  listBody = null;
  view.replaceChildren(
    el("h2", {}, `${record.front} ${record.model || ""} — ${record.status}, ${record.duration_ms} ms`),
    el("p", {}, el("a", { href: "#/" }, "← recent requests")),
    record.warning ? el("p", { class: "warn", "data-testid": "warning" }, "warning: " + record.warning) : null,
    el("div", { class: "columns" },
      el("section", { class: "card" }, block("The client sent", record.client_sent, "client-sent")),
      el("section", { class: "card" }, block("The client got", record.client_got, "client-got"))),
    ...record.attempts.map((attempt, i) => attemptCard(attempt, i + 1)),
    record.truncated_pieces ? el("p", { class: "warn" }, `${record.truncated_pieces} piece(s) over the size cap left out`) : null,
  );
}

// --- models -------------------------------------------------------------------

async function forget(page, fact) {
  const query = `?model=${encodeURIComponent(page.model)}&backend=${encodeURIComponent(page.backend)}`;
  const answer = await fetch("/api/facts/" + encodeURIComponent(fact.fact) + query, {
    method: "DELETE",
    headers: headers(),
  });
  if (!answer.ok) alert("forgetting failed: " + answer.status);
  route();
}

async function showModels(number) {
  const { models } = await getJSON("/ui/api/models");
  if (!current(number)) return;
  listBody = null;
  const cards = models.map((page) => {
    const series = Object.entries(page.series || {}).map(([name, labels]) =>
      el("tr", {}, el("td", {}, name), el("td", {}, Object.entries(labels).map(([k, v]) => (k ? `${k} ${v}` : v)).join(", "))));
    const facts = page.facts.map((fact) =>
      el("tr", {},
        el("td", {}, fact.fact), el("td", {}, JSON.stringify(fact.value)), el("td", {}, fact.reason || ""),
        el("td", {}, fact.learned_at),
        el("td", {}, el("button", { "data-testid": "forget", onclick: () => forget(page, fact) }, "forget"))));
    return el("section", { class: "card", "data-testid": "model" },
      el("h3", {}, `${page.model} @ ${page.backend}`),
      el("p", { "data-testid": "summary" }, page.summary || "no call checked yet"),
      el("table", {}, el("tbody", {}, ...series)),
      el("h4", {}, "Learned facts"),
      facts.length ? el("table", {}, el("tbody", {}, ...facts)) : el("p", {}, "none"));
  });
  view.replaceChildren(el("h2", {}, "Models"), ...(cards.length ? cards : [el("p", {}, "No model seen yet.")]));
}

// --- routing ------------------------------------------------------------------

// Each view is fetched, then shown only if no later navigation started meanwhile.
let routing = 0;

function current(number) {
  return number === routing;
}

async function route() {
  const number = ++routing;
  const hash = location.hash || "#/";
  try {
    if (hash.startsWith("#/request/")) await showRequest(decodeURIComponent(hash.slice(10)), number);
    else if (hash === "#/models") await showModels(number);
    else await showList(number);
  } catch (error) {
    if (current(number)) view.replaceChildren(el("p", { class: "bad" }, "Could not load: " + error.message));
  }
}

window.addEventListener("hashchange", route);
connect();
route();
