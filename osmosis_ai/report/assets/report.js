"use strict";
// Sorting, filtering and searching the row tables, and the trajectory viewer. Trajectories are
// a gzip-compressed JSON array per run, decompressed by the browser the first time one is opened.
(function () {
  const cache = new Map();

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  async function trajectories(run) {
    if (!cache.has(run)) {
      const holder = document.querySelector('script.trajectories[data-run="' + run + '"]');
      const binary = atob(holder.textContent.trim());
      const bytes = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      cache.set(run, new Response(stream).text().then(JSON.parse));
    }
    return cache.get(run);
  }

  // -- tables ------------------------------------------------------------------------------------
  function sortValue(cell) {
    const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent;
    const number = Number(raw);
    return raw !== "" && !Number.isNaN(number) ? number : raw.toLowerCase();
  }

  function sortBy(table, header) {
    const column = Array.prototype.indexOf.call(header.parentNode.children, header);
    const descending = header.classList.contains("asc");
    table.querySelectorAll("th").forEach((th) => th.classList.remove("asc", "desc"));
    header.classList.add(descending ? "desc" : "asc");
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = sortValue(a.cells[column]), y = sortValue(b.cells[column]);
      const order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
      return descending ? -order : order;
    });
    rows.forEach((row) => body.appendChild(row));
  }

  function applyFilters(run) {
    const outcome = document.querySelector('select.filter[data-run="' + run + '"]').value;
    const words = document.querySelector('input.search[data-run="' + run + '"]').value.toLowerCase().trim();
    const rows = document.querySelectorAll('table.rows[data-run="' + run + '"] tbody tr');
    let shown = 0;
    rows.forEach((row) => {
      const visible = (!outcome || row.dataset.outcome === outcome) &&
        (!words || row.textContent.toLowerCase().includes(words));
      row.hidden = !visible;
      if (visible) shown++;
    });
    document.querySelector('span.shown[data-run="' + run + '"]').textContent = shown + " of " + rows.length + " rows";
  }

  // -- the trajectory viewer ---------------------------------------------------------------------
  function format(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function messageIndexOf(event) {
    for (const key of ["message_index", "index", "message"]) {
      if (typeof event[key] === "number") return event[key];
    }
    return -1;
  }

  function issue(kind, event) {
    const box = el("div", "issue " + kind);
    const where = event.turn === -1 ? "final messages" : "turn " + event.turn;
    const what = event.kind || event.classification || event.type || "";
    const title = kind === "violation" ? "append-only violation" : "template drift";
    box.appendChild(el("strong", null, title + " (" + where + (what ? ", " + what : "") + ")"));
    const detail = Object.assign({}, event);
    ["turn", "index", "message_index", "kind", "classification", "type", "detail"].forEach((k) => delete detail[k]);
    if (event.detail) box.appendChild(el("div", null, format(event.detail)));
    if (Object.keys(detail).length) box.appendChild(el("pre", null, format(detail)));
    return box;
  }

  function messageNode(message, index, turn) {
    const node = el("div", "msg role-" + (message.role || "unknown"));
    node.dataset.index = index;
    const head = el("div");
    head.appendChild(el("span", "role", message.role || "?"));
    if (message.name) head.appendChild(el("span", "turn", message.name));
    if (message.tool_call_id) head.appendChild(el("span", "turn", "answers " + message.tool_call_id));
    if (turn) {
      const bits = ["turn " + turn.turn];
      if (turn.latency_ms !== null && turn.latency_ms !== undefined) bits.push(turn.latency_ms.toFixed(turn.latency_ms < 10 ? 1 : 0) + " ms");
      if (turn.prompt_tokens !== null && turn.prompt_tokens !== undefined) bits.push(turn.prompt_tokens + " prompt tokens");
      if (turn.generated_tokens !== null && turn.generated_tokens !== undefined) bits.push(turn.generated_tokens + " generated");
      if (turn.finish_reason) bits.push("finish: " + turn.finish_reason);
      head.appendChild(el("span", "turn", bits.join(" · ")));
    }
    node.appendChild(head);
    if (message.content !== undefined && message.content !== null && message.content !== "") {
      node.appendChild(el("div", "content", format(message.content)));
    }
    for (const key of ["reasoning_content", "reasoning"]) {
      if (message[key]) node.appendChild(el("pre", "muted", key + ": " + format(message[key])));
    }
    (message.tool_calls || []).forEach((call) => {
      const fn = call.function || {};
      const box = el("div", "tool-call");
      box.appendChild(el("strong", null, "tool call " + (fn.name || "?") + (call.id ? " (" + call.id + ")" : "")));
      box.appendChild(el("pre", null, format(fn.arguments === undefined ? call : fn.arguments)));
      node.appendChild(box);
    });
    return node;
  }

  function tokenBar(runs) {
    const wrap = el("div");
    const total = runs.reduce((sum, r) => sum + r[1], 0);
    const generated = runs.reduce((sum, r) => sum + (r[0] ? r[1] : 0), 0);
    const bar = el("div", "tokens");
    runs.forEach((r) => {
      const span = el("span", r[0] ? "generated" : "prompt");
      span.style.flexGrow = String(r[1]);
      span.title = (r[0] ? "generated: " : "prompt / tool / template: ") + r[1] + " tokens";
      bar.appendChild(span);
    });
    wrap.appendChild(bar);
    const legend = el("div", "legend muted", "tokens of the final sequence: " + total);
    const gen = el("i"); gen.style.background = "var(--gen)";
    const prompt = el("i"); prompt.style.background = "var(--prompt)";
    legend.appendChild(gen); legend.appendChild(document.createTextNode("generated " + generated));
    legend.appendChild(prompt); legend.appendChild(document.createTextNode("not generated " + (total - generated)));
    wrap.appendChild(legend);
    return wrap;
  }

  async function openRow(run, index) {
    const viewer = document.querySelector('.viewer[data-run="' + run + '"]');
    const all = await trajectories(run);
    const t = all[index];
    if (!t) return;
    document.querySelectorAll('table.rows[data-run="' + run + '"] tr.selected').forEach((r) => r.classList.remove("selected"));
    const tr = document.querySelector('table.rows[data-run="' + run + '"] tr[data-index="' + index + '"]');
    if (tr) tr.classList.add("selected");
    viewer.replaceChildren();
    viewer.hidden = false;
    viewer.dataset.index = index;
    const head = el("div", "head");
    head.appendChild(el("h3", null, t.label));
    const outcome = el("span", "outcome " + t.outcome, t.outcome);
    outcome.dataset.field = "outcome";
    head.appendChild(outcome);
    const facts = [["score", t.score], ["finish", t.finish], ["latency", t.latency === null ? null : t.latency.toFixed(0) + " ms"],
      ["prompt tokens", t.prompt], ["completion tokens", t.completion]];
    Object.keys(t.scores || {}).forEach((name) => facts.push([name, t.scores[name]]));
    facts.forEach(([name, value]) => {
      if (value === null || value === undefined) return;
      const span = el("span", null, name + ": " + value);
      span.dataset.field = name;
      head.appendChild(span);
    });
    viewer.appendChild(head);
    if (t.error) viewer.appendChild(el("p", "warning", t.error));
    if (t.tokenRuns && t.tokenRuns.length) viewer.appendChild(tokenBar(t.tokenRuns));
    const chat = el("div", "chat");
    const nodes = t.messages.map((m, i) => messageNode(m, i, t.turns[String(i)]));
    const unplaced = [];
    [["violation", t.violations], ["drift", t.drift]].forEach(([kind, events]) => {
      (events || []).forEach((event) => {
        const at = messageIndexOf(event);
        if (at >= 0 && at < nodes.length) {
          nodes[at].classList.add(kind);
          nodes[at].appendChild(issue(kind, event));
        } else {
          unplaced.push(issue(kind, event));
        }
      });
    });
    nodes.forEach((n) => chat.appendChild(n));
    unplaced.forEach((n) => chat.appendChild(n));
    if (!nodes.length) chat.appendChild(el("p", "muted", "This results file keeps no messages for this row."));
    viewer.appendChild(chat);
    Object.keys(t.extra || {}).forEach((key) => {
      const box = el("div", "extra");
      box.appendChild(el("strong", null, key.replace(/_/g, " ")));
      box.appendChild(el("pre", null, format(t.extra[key])));
      viewer.appendChild(box);
    });
    document.body.dataset.viewer = run + ":" + index;
    document.body.dataset.viewerMs = Math.round(performance.now()); // when the first row was drawn: benchmarks/report.py
  }

  function openFromHash() {
    const match = /view=(\d+):(\d+)/.exec(location.hash);
    if (match) {
      openRow(match[1], Number(match[2])).then(() => {
        const viewer = document.querySelector('.viewer[data-run="' + match[1] + '"]');
        if (viewer) viewer.scrollIntoView();
      });
    }
  }

  document.querySelectorAll("table.sortable").forEach((table) => {
    table.querySelectorAll("th").forEach((th) => th.addEventListener("click", () => sortBy(table, th)));
  });
  document.querySelectorAll("table.rows").forEach((table) => {
    const run = table.dataset.run;
    table.addEventListener("click", (event) => {
      const row = event.target.closest("tr[data-index]");
      if (row) history.replaceState(null, "", "#view=" + run + ":" + row.dataset.index), openRow(run, Number(row.dataset.index));
    });
    table.addEventListener("keydown", (event) => {
      const row = event.target.closest("tr[data-index]");
      if (row && event.key === "Enter") openRow(run, Number(row.dataset.index));
    });
    document.querySelector('select.filter[data-run="' + run + '"]').addEventListener("change", () => applyFilters(run));
    document.querySelector('input.search[data-run="' + run + '"]').addEventListener("input", () => applyFilters(run));
    applyFilters(run);
  });
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
  document.body.dataset.ready = "1";
  document.body.dataset.readyMs = Math.round(performance.now()); // page usable, ms after navigation start
})();
