// The wfhost dashboard: plain JavaScript over the /v1 API, no build step.
// Every value from the API reaches the page through textContent or an
// attribute, never as markup.
'use strict';

const PAGE_EVENTS = 500; // events per timeline page
const PAGE_RUNS = 50;
const TOKEN_KEY = 'wfhost-token';
const THEME_KEY = 'wfhost-theme';

// ---------- small helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const $ = (id) => document.getElementById(id);
// replaceChildren, skipping what is absent (it would print "null").
const fill = (el, ...kids) => el.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
const enc = encodeURIComponent;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function ago(ms) {
  if (!ms) return '';
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

function stamp(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

function duration(us) {
  if (us === undefined || us === null) return '';
  if (us < 1000) return `${us} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

function badge(status) {
  return h('span', { class: `badge s-${status || 'unknown'}` }, status || '—');
}

// ---------- the API ----------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function api(path, options = {}) {
  const init = { ...options, headers: { ...authHeaders(), ...(options.headers || {}) } };
  if (options.json !== undefined) {
    init.method = init.method || 'POST';
    init.body = JSON.stringify(options.json);
    init.headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(`/v1${path}`, init);
  if (res.status === 401) {
    askToken();
    throw new ApiError(401, { message: 'a token is required' });
  }
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

async function download(path, fallbackName) {
  const res = await fetch(`/v1${path}`, { headers: authHeaders() });
  if (!res.ok) {
    let body = null;
    try { body = await res.json(); } catch { /* not JSON */ }
    throw new ApiError(res.status, body);
  }
  const disposition = res.headers.get('Content-Disposition') || '';
  const named = /filename="([^"]+)"/.exec(disposition);
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: named ? named[1] : fallbackName });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function askToken() {
  const dialog = $('token-dialog');
  if (!dialog.open) dialog.showModal();
}

function toast(message, kind = 'info') {
  const el = h('div', { class: `toast ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, message);
  document.body.append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

function failed(e) {
  toast(e instanceof ApiError ? `${e.message}` : String(e), 'error');
}

// ---------- the runs sidebar ----------

const list = { runs: [], nextAfter: null, selected: -1, loading: false, generation: 0 };

function filterQuery() {
  const p = new URLSearchParams();
  const q = $('filter-q').value.trim();
  const status = $('filter-status').value;
  const workflow = $('filter-workflow').value.trim();
  if (q) p.set('q', q);
  if (status) p.set('status', status);
  if (workflow) p.set('workflow', workflow);
  return p;
}

async function loadRuns(reset) {
  const generation = reset ? ++list.generation : list.generation;
  const p = filterQuery();
  p.set('limit', String(PAGE_RUNS));
  if (!reset && list.nextAfter) p.set('after', list.nextAfter);
  list.loading = true;
  try {
    const page = await api(`/runs?${p}`);
    if (generation !== list.generation) return; // a newer filter won
    list.runs = reset ? page.runs : list.runs.concat(page.runs);
    list.nextAfter = page.next_after;
    renderRuns();
  } catch (e) {
    if (e.status !== 401) failed(e);
  } finally {
    list.loading = false;
  }
}

// The first page again, keeping what was paged in after it.
async function refreshRuns() {
  if (list.loading || document.hidden) return;
  const p = filterQuery();
  p.set('limit', String(Math.max(PAGE_RUNS, list.runs.length)));
  try {
    const page = await api(`/runs?${p}`);
    list.runs = page.runs;
    list.nextAfter = page.next_after;
    renderRuns();
  } catch { /* shown on the next user action */ }
}

function renderRuns() {
  const ul = $('run-list');
  const current = view.run && view.run.id;
  ul.replaceChildren(...list.runs.map((r, i) => {
    const finished = ['succeeded', 'failed', 'cancelled'].includes(r.status);
    return h('li', {
      role: 'option',
      id: `run-${r.id}`,
      'aria-selected': String(r.id === current),
      class: i === list.selected ? 'cursor' : null,
      dataset: { run: r.id },
      onclick: () => openRun(r.id),
    },
    h('div', { class: 'line1' }, h('span', { class: 'wf' }, r.workflow_id), badge(r.status)),
    h('div', { class: 'line2' },
      h('span', { class: 'id' }, r.id),
      r.branches > 1 ? h('span', { class: 'branch-count' }, `${r.branches} branches`) : null),
    h('div', { class: 'line3' },
      h('time', { datetime: new Date(r.created_at).toISOString(), title: stamp(r.created_at) }, `started ${ago(r.created_at)}`),
      finished ? h('time', { title: stamp(r.last_at) }, ` · finished ${ago(r.last_at)}`) : null,
      r.session ? h('span', { class: 'session', title: r.session }, ` · ${r.session}`) : null));
  }));
  if (!list.runs.length) ul.append(h('li', { class: 'none' }, 'No runs match.'));
  $('more-runs').hidden = !list.nextAfter;
}

function moveCursor(delta) {
  if (!list.runs.length) return;
  list.selected = Math.max(0, Math.min(list.runs.length - 1, list.selected + delta));
  renderRuns();
  const li = $('run-list').children[list.selected];
  if (li) {
    li.scrollIntoView({ block: 'nearest' });
    $('run-list').setAttribute('aria-activedescendant', li.id);
  }
}

// ---------- schedules ----------

async function loadSchedules() {
  try {
    const { schedules } = await api('/schedules');
    const ul = $('schedule-list');
    ul.replaceChildren(...schedules.map((s) => h('li', { dataset: { schedule: s.name }, onclick: () => { location.hash = `#/schedules/${enc(s.name)}`; } },
      h('div', { class: 'line1' }, h('span', { class: 'wf' }, s.name), badge(s.paused ? 'paused' : 'scheduled')),
      h('div', { class: 'line2' }, h('code', {}, s.cron), ` (${s.tz})`),
      h('div', { class: 'line3' }, s.paused ? 'paused' : (s.next_tick_ms ? `next ${stamp(s.next_tick_ms)}` : 'no tick left')))));
    if (!schedules.length) ul.append(h('li', { class: 'none' }, 'No schedules: `wfhost schedule add` or POST /v1/schedules adds one.'));
  } catch (e) {
    if (e.status !== 401) failed(e);
  }
}

async function openSchedule(name) {
  stopFollowing();
  view.run = null;
  const main = $('main');
  main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  try {
    const { schedule: s, ticks } = await api(`/schedules/${enc(name)}`);
    const act = (path, what) => async () => {
      try {
        await api(`/schedules/${enc(name)}/${path}`, { json: {} });
        toast(what);
        loadSchedules();
        openSchedule(name);
      } catch (e) { failed(e); }
    };
    const remove = async () => {
      if (!confirm(`Remove schedule ${name}? Its runs stay.`)) return;
      try {
        await api(`/schedules/${enc(name)}`, { method: 'DELETE' });
        loadSchedules();
        location.hash = '#/';
      } catch (e) { failed(e); }
    };
    const tickRow = (t) => h('tr', { class: `tick s-${t.state}` },
      h('td', {}, stamp(t.tick_ms), t.manual ? ' (triggered)' : ''),
      h('td', {}, badge(t.state)),
      h('td', {}, t.run_id && t.state === 'started' ? h('a', { href: `#/runs/${enc(t.run_id)}` }, t.run_id) : (t.run_id || '')),
      h('td', {}, t.reason || ''));
    main.replaceChildren(h('section', { class: 'schedule' },
      h('header', { class: 'run-head' },
        h('div', { class: 'title' },
          h('h2', {}, s.name, ' ', badge(s.paused ? 'paused' : 'scheduled')),
          h('div', { class: 'meta' }, h('code', {}, s.cron), ` in ${s.tz} · overlap ${s.overlap} · catch-up ${s.catch_up}`),
          h('p', { class: 'next' }, s.paused ? 'Paused: its ticks start nothing.' : (s.next_tick_ms ? ['Next run ', h('time', {}, stamp(s.next_tick_ms))] : 'No tick left.')),
          h('div', { class: 'meta' }, 'workflow ', h('code', {}, s.workflow), ' · workspace ', h('code', {}, s.workspace)),
          s.missed ? h('p', { class: 'muted' }, `${s.missed} tick(s) missed while no server looked`) : null),
        h('div', { class: 'actions' },
          s.paused
            ? h('button', { type: 'button', onclick: act('resume', 'Schedule resumed') }, 'Resume')
            : h('button', { type: 'button', onclick: act('pause', 'Schedule paused') }, 'Pause'),
          h('button', { type: 'button', onclick: act('trigger', 'Run triggered') }, 'Run now'),
          h('button', { type: 'button', class: 'danger', onclick: remove }, 'Remove'))),
      h('table', { class: 'ticks', 'aria-label': 'Ticks, newest first' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Tick'), h('th', {}, 'State'), h('th', {}, 'Run'), h('th', {}, 'Reason'))),
        h('tbody', {}, ticks.length ? ticks.map(tickRow) : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No ticks yet.'))))));
  } catch (e) {
    main.replaceChildren(h('p', { class: 'error' }, e.message || String(e)));
  }
}

// ---------- sessions ----------

async function loadSessions() {
  try {
    const { sessions } = await api('/sessions');
    const ul = $('session-list');
    ul.replaceChildren(...sessions.map((s) => h('li', { onclick: () => { location.hash = `#/sessions/${enc(s.id)}`; } },
      h('div', { class: 'line1' }, h('span', { class: 'wf' }, s.id)),
      h('div', { class: 'line3' }, `${s.runs} run${s.runs === 1 ? '' : 's'} · active ${ago(s.last_at)}`, s.git_branch ? ` · ⎇ ${s.git_branch}` : ''))));
    if (!sessions.length) ul.append(h('li', { class: 'none' }, 'No sessions yet.'));
  } catch (e) {
    if (e.status !== 401) failed(e);
  }
}

async function openSession(id) {
  stopFollowing();
  view.run = null;
  const main = $('main');
  main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  try {
    const { runs } = await api(`/sessions/${enc(id)}`);
    const start = Math.min(...runs.map((r) => r.created_at));
    const end = Math.max(...runs.map((r) => r.last_at || r.created_at), start + 1);
    const span = end - start;
    const lanes = runs.map((r) => {
      const left = ((r.created_at - start) / span) * 100;
      const width = Math.max(((r.last_at || r.created_at) - r.created_at) / span * 100, 0.5);
      return h('li', { class: 'lane' },
        h('a', { href: `#/runs/${enc(r.id)}`, class: 'lane-label' }, r.workflow_id, ' ', h('span', { class: 'id' }, r.id)),
        h('div', { class: 'lane-track' },
          h('a', {
            href: `#/runs/${enc(r.id)}`,
            class: `lane-bar s-${r.status}`,
            style: null,
            title: `${r.id}: ${r.status}, ${stamp(r.created_at)} → ${stamp(r.last_at)}`,
            'aria-label': `${r.workflow_id} ${r.status}`,
            dataset: { left: left.toFixed(3), width: width.toFixed(3) },
          })));
    });
    fill(main,
      h('header', { class: 'run-head' },
        h('h2', {}, 'Session ', h('code', {}, id)),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => download(`/sessions/${enc(id)}/export`, `${id}.session.json`).catch(failed) }, 'Export session bundle'))),
      h('p', { class: 'axis' }, h('time', {}, stamp(start)), h('time', {}, stamp(end))),
      h('ol', { class: 'session-lanes', 'aria-label': 'Runs of the session on one time axis' }, lanes));
    // Positions are set through the CSSOM (the policy forbids inline styles).
    for (const bar of main.querySelectorAll('.lane-bar')) {
      bar.style.marginLeft = `${bar.dataset.left}%`;
      bar.style.width = `${bar.dataset.width}%`;
    }
  } catch (e) {
    main.replaceChildren(h('p', { class: 'error' }, e.message));
  }
}

// ---------- one run ----------

const view = {
  run: null, // summary
  branches: [],
  branch: 1,
  events: [], // the loaded part of the branch's chain, in order
  nextBefore: null, // where the next earlier page ends (null: all loaded)
  lastSeq: 0, // the newest event seen on the stream (any branch)
  selectedRow: null, // the seq of an event of the selected row (rows gain
  // earlier events when earlier pages load, so their first seq moves)
  follow: null, // AbortController of the live stream
  renderQueued: false,
  loadingEarlier: false,
  shown: '', // `run/branch` the events are of
  gateDraft: {}, // {gate, text, lanes}: the open gate's form as filled in
};

async function openRun(id, branch) {
  const same = view.run && view.run.id === id;
  if (!same) stopFollowing();
  const main = $('main');
  if (!same) main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  try {
    const [summary, branches, notified] = await Promise.all([
      api(`/runs/${enc(id)}/summary`),
      api(`/runs/${enc(id)}/branches`),
      api(`/runs/${enc(id)}/notifications`).catch(() => ({ notifications: [] })),
    ]);
    summary.notifications = notified.notifications;
    view.run = summary;
    view.branches = branches.branches;
    view.branch = branch || summary.branch;
    const listed = list.runs.findIndex((x) => x.id === id);
    if (listed >= 0) list.runs[listed] = summary;
    view.selectedRow = null;
    await Promise.all([loadTail(), loadDefinition(id)]);
    renderRun();
    renderRuns();
    // Events written after the header was read (a run that went on, or
    // ended, meanwhile): the stream will not send them again, so the
    // header is read once more now.
    const head = (view.branches.find((b) => b.branch === view.branch) || {}).head || 0;
    if (view.lastSeq > head) refreshHead();
    if (!view.follow) startFollowing(id);
    const wanted = `#/runs/${enc(id)}${branch ? `/branches/${branch}` : ''}`;
    if (location.hash !== wanted) history.replaceState(null, '', wanted);
  } catch (e) {
    main.replaceChildren(h('p', { class: 'error' }, e.message));
  }
}

async function loadTail() {
  const runId = view.run.id;
  const branch = view.branch;
  const page = await api(`/runs/${enc(runId)}/events?branch=${branch}&before=18446744073709551615&limit=${PAGE_EVENTS}`);
  // Events the stream delivered while this page was read are newer than
  // it: they stay (the stream will not send them again).
  const newest = page.events.length ? page.events[page.events.length - 1].seq : 0;
  const kept = view.shown === `${runId}/${branch}` ? view.events.filter((e) => e.seq > newest) : [];
  view.shown = `${runId}/${branch}`;
  view.events = page.events.concat(kept);
  view.nextBefore = page.next_before;
  view.lastSeq = Math.max(view.lastSeq, newest);
}

// The page before the oldest loaded event; one at a time (the button and
// the scroll can both ask), and dropped if the view moved on meanwhile.
async function loadEarlier() {
  const from = view.nextBefore;
  if (from === null || view.loadingEarlier) return;
  view.loadingEarlier = true;
  try {
    const runId = view.run.id;
    const branch = view.branch;
    const page = await api(`/runs/${enc(runId)}/events?branch=${branch}&before=${from}&limit=${PAGE_EVENTS}`);
    if (!view.run || view.run.id !== runId || view.branch !== branch || view.nextBefore !== from) return;
    view.events = page.events.concat(view.events);
    view.nextBefore = page.next_before;
    renderRun();
  } finally {
    view.loadingEarlier = false;
  }
}

// The loaded events grouped into the timeline's rows: one per block
// execution (with its lanes, gate and telemetry), plus markers.
// What the run produced, from the events loaded (the newest page first):
// the last segment a block added to the payload, and the files its blocks
// wrote. Shown once the run has ended.
function resultPanel(events, status) {
  if (!['succeeded', 'failed', 'cancelled'].includes(status)) return null;
  let result = null;
  const written = [];
  for (const e of events) {
    const ev = e.event;
    if (ev.type !== 'block_completed') continue;
    const pushed = (ev.payload && ev.payload.push) || [];
    const shown = pushed.filter((s) => s.type !== 'VALIDATION_ERROR');
    if (shown.length) result = { segment: shown[shown.length - 1], block: `${ev.node}.${ev.block}`, step: ev.step };
    for (const path of ev.written || []) if (!written.includes(path)) written.push(path);
  }
  if (!result && !written.length) return null;
  return h('section', { class: 'result-panel', 'aria-label': 'Result' },
    h('h3', {}, 'Result'),
    result ? [
      h('p', { class: 'meta' }, `${result.segment.type} from step ${result.step} (${result.block})`),
      h('pre', { class: 'result-text' }, result.segment.content),
    ] : null,
    written.length ? [
      h('h4', {}, `Files written (${written.length})`),
      h('ul', { class: 'written' }, ...written.map((p) => h('li', {}, h('code', {}, p)))),
    ] : null);
}

function rowsOf(events) {
  const rows = [];
  const byStep = new Map();
  const gates = new Map();
  let last = null;
  const open = (e, kind, extra) => {
    const row = { kind, step: e.event.step, seq: e.seq, at: e.at, events: [e], lanes: [], conflicts: [], telemetry: [], notes: [], ...extra };
    rows.push(row);
    // A marker (a timer, a retry) never stands for its step's block.
    if (row.step !== undefined && kind !== 'marker') byStep.set(row.step, row);
    last = row;
    return row;
  };
  const rowFor = (e) => byStep.get(e.event.step) || open(e, 'block', { block: e.event.node ? `${e.event.node}.${e.event.block}` : `step ${e.event.step}` });
  for (const e of events) {
    const ev = e.event;
    switch (ev.type) {
      case 'block_started': {
        // After a fan-in gate's answer the same execution goes on: its
        // lanes, conflicts and the choice stay on one row.
        const prior = byStep.get(ev.step);
        if (prior && !prior.completed && prior.gate && prior.gate.kind === 'fan-in' && prior.gate.answer) {
          prior.events.push(e);
          break;
        }
        open(e, 'block', { block: `${ev.node}.${ev.block}`, attempt: ev.attempt });
        break;
      }
      case 'external_awaited':
        open(e, 'block', { block: `${ev.node}.${ev.block}`, attempt: ev.attempt, prompt: ev.prompt, external: true });
        break;
      case 'block_completed': {
        let row = byStep.get(ev.step);
        if (!row || row.completed) row = open(e, 'block', { block: `${ev.node}.${ev.block}` });
        else row.events.push(e);
        Object.assign(row, { completed: ev, signal: ev.signal, block: `${ev.node}.${ev.block}`, external: false });
        break;
      }
      case 'action_taken': {
        const row = rowFor(e);
        if (row.events[row.events.length - 1] !== e) row.events.push(e);
        row.action = ev;
        row.snapshot = e.snapshot;
        if (ev.gate_id) { row.gate = { id: ev.gate_id, prompt: ev.command.prompt, kind: 'gate' }; gates.set(ev.gate_id, row); }
        break;
      }
      case 'lanes_started': {
        const row = rowFor(e);
        row.events.push(e);
        row.strategy = ev.merge_strategy;
        row.laneNames = ev.lanes;
        break;
      }
      case 'lane_completed': rowFor(e).lanes.push(ev); rowFor(e).events.push(e); break;
      case 'lane:conflict-detected': rowFor(e).conflicts.push(ev); rowFor(e).events.push(e); break;
      case 'fan_in_waiting': {
        const row = rowFor(e);
        row.events.push(e);
        row.gate = { id: ev.gate_id, prompt: ev.prompt, kind: 'fan-in' };
        gates.set(ev.gate_id, row);
        break;
      }
      case 'fan_in_completed': rowFor(e).fanIn = ev; rowFor(e).events.push(e); break;
      case 'telemetry': rowFor(e).telemetry.push(ev); break;
      case 'gate_answered': {
        const row = gates.get(ev.gate_id);
        if (row) { row.gate.answer = ev.decision; row.events.push(e); } else open(e, 'marker', { text: `gate ${ev.gate_id} answered: ${decisionText(ev.decision)}` });
        break;
      }
      case 'checkpointed':
        if (last) { last.notes.push(ev.notes_markdown); last.events.push(e); } else open(e, 'marker', { text: 'checkpoint' });
        break;
      case 'inputs_merged': if (last) last.events.push(e); break;
      case 'run_started': open(e, 'marker', { text: `run started: ${ev.workflow_id}` }); break;
      case 'run_finished': open(e, 'marker', { text: finishedText(ev.outcome), outcome: ev.outcome.status }); break;
      case 'resumed': open(e, 'marker', { text: ev.interrupted ? `resumed; step ${ev.interrupted.step} runs again` : 'resumed' }); break;
      case 'forked': open(e, 'marker', { text: `branch ${e.branch} forked from ${ev.from_snapshot}` }); break;
      case 'timer_started': open(e, 'marker', { text: `[${ev.step}] ${ev.node}.${ev.block} sleeps until ${stamp(ev.due_at_ms)}` }); break;
      case 'retry_scheduled':
        open(e, 'marker', { text: `[${ev.step}] ${ev.node}.${ev.block} attempt ${ev.attempt} → ${ev.signal}; retry ${ev.retry} in ${duration(ev.wait_ms * 1000)}, at ${stamp(ev.due_at_ms)}${ev.failure ? `: ${ev.failure}` : ''}`, retry: true });
        break;
      case 'lane_retried':
        open(e, 'marker', { text: `[${ev.step}] lane ${ev.lane} attempt ${ev.attempt} → ${ev.signal}, runs again${ev.wait_ms != null ? ` in ${duration(ev.wait_ms * 1000)}` : ''}${ev.failure ? `: ${ev.failure}` : ''}`, retry: true });
        break;
      default: open(e, 'marker', { text: ev.type });
    }
  }
  return rows;
}

function decisionText(d) {
  if (!d) return '';
  switch (d.answer) {
    case 'approved': return 'approved';
    case 'changes-requested': return `changes requested: ${d.text}`;
    case 'use-lane': return d.all ? `use lane ${d.all}` : `use lanes ${Object.entries(d.files || {}).map(([f, l]) => `${f}=${l}`).join(', ')}`;
    default: return d.answer;
  }
}

function scheduleRender() {
  if (view.renderQueued) return;
  view.renderQueued = true;
  requestAnimationFrame(() => { view.renderQueued = false; if (view.run) renderRun(); });
}

function renderRun() {
  const main = $('main');
  const r = view.run;
  const rows = rowsOf(view.events);
  const branchInfo = view.branches.find((b) => b.branch === view.branch) || {};
  const status = branchInfo.status || r.status;
  view.liveStatus = status;
  const openGate = status === 'waiting' ? [...rows].reverse().find((row) => row.gate && !row.gate.answer) : null;
  const scroller = main.querySelector('.timeline-scroll');
  const keepBottom = scroller ? scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40 : true;
  const oldHeight = scroller ? scroller.scrollHeight : 0;
  const oldTop = scroller ? scroller.scrollTop : 0;
  fill(main,
    runHeader(r, status),
    branchGraph(),
    workflowGraph(rows, status),
    openGate ? gatePanel(openGate) : null,
    resultPanel(view.events, status),
    h('div', { class: 'run-body' },
      h('section', { class: 'timeline', 'aria-label': `Timeline of branch ${view.branch}` },
        h('div', { class: 'timeline-scroll', tabindex: '0' },
          view.nextBefore !== null
            ? h('button', { type: 'button', class: 'more earlier', onclick: () => loadEarlier().catch(failed) }, `Load earlier events (before #${view.nextBefore})`)
            : null,
          timelineTable(rows))),
      detailPanel(rows)));
  main.dataset.lastSeq = String(view.lastSeq);
  // The running row's clock moves while the run runs.
  clearTimeout(view.clockTimer);
  if (isLive() && main.querySelector('tr.output-row')) view.clockTimer = setTimeout(scheduleRender, 1000);
  main.dataset.branch = String(view.branch);
  main.dataset.events = String(view.events.length);
  const s = main.querySelector('.timeline-scroll');
  if (s) s.scrollTop = keepBottom && oldTop === 0 && !oldHeight ? s.scrollHeight : (keepBottom ? s.scrollHeight : oldTop + (s.scrollHeight - oldHeight) * (oldTop < 40 ? 1 : 0));
  const earlier = main.querySelector('.more.earlier');
  if (earlier && 'IntersectionObserver' in window) {
    const io = new IntersectionObserver((entries) => {
      if (entries.some((en) => en.isIntersecting)) { io.disconnect(); loadEarlier().catch(failed); }
    }, { root: s });
    io.observe(earlier);
  }
}

// What a running run waits for: its jobs queued for an agent or leased.
function openJobs(jobs) {
  return jobs.map((j) => {
    const what = `job ${j.job} (${j.node}.${j.block}${j.lane ? ` lane ${j.lane}` : ''}, attempt ${j.attempt})`;
    const since = h('time', { title: stamp(j.since_ms) }, ago(j.since_ms));
    return j.state === 'leased'
      ? h('p', { class: 'queue s-running' }, `${what} runs on agent ${j.agent || '?'}, leased `, since)
      : h('p', { class: 'queue s-waiting' }, `Waiting for an agent: ${what} queued `, since);
  });
}

// The timer a sleeping run rests on: the run's own `timer` when the page
// has it, else the branch's last event (a `timer_started` or a
// `retry_scheduled`).
function restingOn(r) {
  if (r.timer) return r.timer;
  const last = view.events.length ? view.events[view.events.length - 1].event : null;
  if (!last || last.due_at_ms == null) return null;
  return { node: last.node, block: last.block, due_at_ms: last.due_at_ms, retry: last.type === 'retry_scheduled' ? last.retry : null };
}

// A notification the run gave, and how its delivery went.
function notificationLine(n) {
  const how = n.state === 'delivered'
    ? `delivered after ${n.attempts} attempt${n.attempts === 1 ? '' : 's'}`
    : `${n.state}${n.attempts ? ` after ${n.attempts} attempt${n.attempts === 1 ? '' : 's'}` : ''}${n.last_error ? `: ${n.last_error}` : ''}`;
  return h('p', { class: `notification s-${n.state === 'delivered' ? 'succeeded' : (n.state === 'failed' ? 'failed' : 'waiting')}` }, `Notified ${n.event} to ${n.target}: ${how}`);
}

// What a sleeping run waits for: a `sleep` block, or a failed block's retry.
function timerLine(t) {
  if (!t) return null;
  const what = t.retry
    ? `Retry ${t.retry} of ${t.node}.${t.block} is due `
    : `${t.node}.${t.block} sleeps; due `;
  return h('p', { class: 'queue s-sleeping timer' }, what, h('time', { title: stamp(t.due_at_ms) }, stamp(t.due_at_ms)));
}

function runHeader(r, status) {
  const live = ['running', 'waiting', 'sleeping', 'interrupted'].includes(status);
  const resumable = ['interrupted'].includes(status);
  return h('header', { class: 'run-head' },
    h('div', { class: 'title' },
      h('h2', {}, r.workflow_id, ' ', badge(status)),
      h('div', { class: 'meta' },
        h('code', { class: 'id' }, r.id),
        ' · started ', h('time', { title: stamp(r.created_at) }, ago(r.created_at)),
        ' · last event ', h('time', { title: stamp(r.last_at) }, ago(r.last_at)),
        ' · workspace ', h('code', {}, r.workspace),
        r.session ? [' · session ', h('a', { href: `#/sessions/${enc(r.session)}` }, r.session)] : null),
      status === 'running' ? openJobs(r.open_jobs || []) : null,
      status === 'sleeping' ? timerLine(restingOn(r)) : null,
      (r.notifications || []).map(notificationLine)),
    h('div', { class: 'actions' },
      live ? h('button', { type: 'button', class: 'danger', onclick: cancelRun, title: 'Stop it for good and record it as cancelled' }, 'Cancel run') : null,
      resumable ? h('button', { type: 'button', onclick: resumeRun }, 'Resume') : null,
      h('button', { type: 'button', onclick: () => download(`/runs/${enc(r.id)}/report?branch=${view.branch}`, `${r.id}.md`).catch(failed) }, 'Export Markdown'),
      h('button', { type: 'button', onclick: () => download(`/runs/${enc(r.id)}/export`, `${r.id}.bundle.json`).catch(failed) }, 'Export bundle')));
}

// The branches as a graph: one lane per branch along the run's sequence
// numbers, each joined to the branch it was forked from at its fork.
function branchGraph() {
  const bs = view.branches;
  const NS = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs, ...kids) => {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    for (const k of kids) el.append(k);
    return el;
  };
  const maxSeq = Math.max(1, ...bs.map((b) => b.head));
  const width = 600;
  const rowH = 26;
  const x = (seq) => 20 + (seq / maxSeq) * (width - 40);
  const y = (i) => 14 + i * rowH;
  const index = new Map(bs.map((b, i) => [b.branch, i]));
  const graph = svg('svg', { viewBox: `0 0 ${width} ${y(bs.length - 1) + 14}`, class: 'branch-svg', role: 'img', 'aria-label': `${bs.length} branch${bs.length === 1 ? '' : 'es'}` });
  bs.forEach((b, i) => {
    const start = b.forked_at || 0;
    const parentRow = b.forked_from_branch !== undefined ? index.get(b.forked_from_branch) : undefined;
    if (b.forked_from && parentRow !== undefined) {
      graph.append(svg('path', { d: `M${x(start)},${y(parentRow)} C${x(start) + 10},${y(parentRow)} ${x(start)},${y(i)} ${x(start) + 14},${y(i)}`, class: 'fork-link' }));
    }
    graph.append(svg('line', { x1: x(start), y1: y(i), x2: x(b.head), y2: y(i), class: `branch-line s-${b.status}` }));
    graph.append(svg('circle', { cx: x(b.head), cy: y(i), r: 5, class: `head s-${b.status}` }, svg('title', {}, document.createTextNode(`branch ${b.branch} head #${b.head}: ${b.status}`))));
  });
  const items = bs.map((b) => h('li', {},
    h('a', {
      href: `#/runs/${enc(view.run.id)}/branches/${b.branch}`,
      class: b.branch === view.branch ? 'current' : null,
      'aria-current': b.branch === view.branch ? 'true' : null,
    }, `branch ${b.branch}`),
    ' ', badge(b.status),
    h('span', { class: 'muted' }, ` ${b.events} events · head #${b.head}`, b.forked_from ? ` · forked from ${b.forked_from}` : '')));
  return h('section', { class: 'branches', 'aria-label': 'Branches' },
    h('div', { class: 'branch-graph' }, graph),
    h('ol', { class: 'branch-list' }, items));
}

function timelineTable(rows) {
  const body = rows.map((row, i) => {
    if (row.kind === 'marker') {
      return h('tr', { class: `marker ${row.outcome ? `s-${row.outcome}` : ''} ${row.retry ? 'retry' : ''}`, dataset: { seq: row.seq } },
        h('td', { colspan: 9 }, h('span', { class: 'marker-text' }, row.text), ' ', h('time', { class: 'muted', title: stamp(row.at) }, stamp(row.at))));
    }
    const c = row.completed;
    const selected = isSelected(row);
    const tr = h('tr', {
      class: `step ${selected ? 'selected' : ''} ${c && c.failure ? 'failed' : ''}`,
      tabindex: '0',
      'aria-selected': String(selected),
      dataset: { seq: row.seq, step: row.step, index: i },
      onclick: () => selectRow(row.seq, true),
      onkeydown: (ev) => { if (ev.key === 'Enter') selectRow(row.seq, true); },
    },
    h('td', { class: 'num' }, row.step),
    h('td', { class: 'block' }, h('code', { title: row.block }, row.block), row.external && !c ? h('span', { class: 'tag' }, 'awaiting client') : null),
    h('td', { class: 'num' }, row.attempt || ''),
    h('td', { class: 'signal-cell' }, row.signal ? h('span', { class: `signal ${/FAIL/.test(row.signal) ? 'bad' : ''}` }, row.signal.replace('SIGNAL:', '')) : ''),
    h('td', { class: 'action' }, row.action ? h('span', { class: 'action-text', title: row.action.action }, row.action.action) : '', row.gate ? h('span', { class: 'tag gate' }, row.gate.answer ? `${row.gate.id}: ${decisionText(row.gate.answer)}` : `${row.gate.id} open`) : null),
    h('td', { class: 'num' }, c ? duration(c.duration_us) : ''),
    h('td', { class: 'num', title: c && c.statistics.usage ? `tokens: ${usageText(c.statistics.usage)}` : 'tokens' }, c ? c.statistics.tokens_used : ''),
    h('td', { class: 'num', title: 'lines written' }, c ? c.statistics.lines_written : ''),
    h('td', {}, row.snapshot ? h('button', { type: 'button', class: 'small', 'aria-label': `Fork a new branch after step ${row.step}`, title: `Fork from ${row.snapshot}`, onclick: (ev) => { ev.stopPropagation(); forkAt(row.snapshot, row.step); } }, 'fork') : null));
    const out = [tr];
    // Warnings and errors the block's plugin logged (a rolled-back change
    // outside the file restrictions among them), shown even on success.
    const warnings = c ? warningsOf(c.log) : [];
    if (warnings.length) {
      out.push(h('tr', { class: 'warnings-row' }, h('td', {}), h('td', { colspan: 8 },
        warnings.map((w) => h('div', { class: 'warning', role: 'note' }, `⚠ ${w}`)))));
    }
    if (row.lanes.length || row.laneNames) out.push(lanesRow(row));
    else if (!c && !row.external && row.kind === 'block' && isLive()) out.push(outputRow(row));
    return out;
  });
  return h('table', { class: 'steps' },
    h('thead', {}, h('tr', {}, ...['Step', 'Block', 'Try', 'Signal', 'Action', 'Duration', 'Tokens', 'Lines', ''].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, body.flat()));
}

function lanesRow(row) {
  const names = row.laneNames || row.lanes.map((l) => l.lane);
  const done = new Map(row.lanes.map((l) => [l.lane, l]));
  // A conflict is recorded again once its lane is chosen: the last word.
  const conflicts = [...new Map(row.conflicts.map((c) => [c.conflictingFile, c])).values()];
  const conflicted = new Map();
  for (const c of conflicts) for (const l of c.lanes) conflicted.set(l, (conflicted.get(l) || []).concat(c));
  return h('tr', { class: 'lanes-row' }, h('td', {}), h('td', { colspan: 8 },
    h('div', { class: 'lanes' }, names.map((name) => {
      const l = done.get(name);
      return h('div', { class: `lane-card ${l ? (l.failure ? 's-failed' : 's-succeeded') : 's-running'}` },
        h('div', { class: 'lane-name' }, name),
        l ? h('div', {}, l.signal.replace('SIGNAL:', ''), ' · ', duration(l.duration_us)) : h('div', {}, 'running…'),
        l && l.changed && l.changed.length ? h('div', { class: 'muted' }, `changed ${l.changed.join(', ')}`) : null,
        l && l.failure ? h('div', { class: 'error' }, l.failure) : null,
        (conflicted.get(name) || []).map((c) => h('div', { class: 'conflict' }, `conflict on ${c.conflictingFile}`)));
    })),
    h('div', { class: 'merge' },
      row.strategy ? `merge: ${row.strategy}` : '',
      conflicts.map((c) => h('div', { class: 'conflict' }, `${c.conflictingFile}: changed by ${c.lanes.join(', ')} → ${conflictOutcome(row, c)}`)),
      row.fanIn ? h('div', {}, `fan-in: applied ${filesByLane(row.fanIn.applied)}; discarded ${filesByLane(row.fanIn.discarded)}`) : null)));
}

// Which lane a conflicting file came from: applied at once (first
// complete wins), or chosen at the fan-in gate.
function conflictOutcome(row, c) {
  const d = row.gate && row.gate.answer;
  if (c.appliedFrom && d) return `${c.appliedFrom}, chosen at gate ${row.gate.id}`;
  if (c.appliedFrom) return `applied from ${c.appliedFrom} (${c.resolution})`;
  if (d && d.answer === 'use-lane') {
    const lane = (d.files && d.files[c.conflictingFile]) || d.all;
    if (lane) return `${lane}, chosen at gate ${row.gate.id}`;
  }
  if (d && d.answer === 'resolved') return `resolved by hand at gate ${row.gate.id}`;
  return 'waiting for a choice';
}

function filesByLane(pairs) {
  return (pairs || []).map(([lane, files]) => `${lane} (${files.length} file${files.length === 1 ? '' : 's'})`).join(', ') || 'nothing';
}

function isSelected(row) {
  return view.selectedRow !== null && row.events.some((e) => e.seq === view.selectedRow);
}

// Select the row starting at `seq`; with `toggle`, a selected row is
// unselected instead.
function selectRow(seq, toggle) {
  const current = $('main').querySelector('tr.step.selected');
  const again = current && Number(current.dataset.seq) === seq;
  view.selectedRow = toggle && again ? null : seq;
  renderRun();
  const tr = $('main').querySelector(`tr.step[data-seq="${seq}"]`);
  if (tr) tr.focus({ preventScroll: false });
}

function detailPanel(rows) {
  const row = rows.find(isSelected);
  if (!row) return h('aside', { class: 'detail empty-detail', 'aria-label': 'Step details' }, h('p', {}, 'Select a step to see its output, payload, logs and telemetry.'));
  const c = row.completed;
  const sections = [];
  sections.push(h('h3', {}, `Step ${row.step} · `, h('code', {}, row.block)));
  if (row.prompt) sections.push(h('h4', {}, 'Prompt given to the client'), h('pre', {}, row.prompt));
  if (c && c.failure) sections.push(h('h4', {}, 'Failure'), h('pre', { class: 'error' }, c.failure));
  if (c) sections.push(bundlesSection(row));
  if (c && c.artifact) {
    let text = c.artifact;
    try { text = JSON.stringify(JSON.parse(c.artifact), null, 2); } catch { /* shown as recorded */ }
    sections.push(h('h4', {}, 'Structured output'), h('pre', {}, text));
    const claimed = claimedFiles(c.artifact);
    if (claimed) sections.push(h('h4', {}, 'Files the agent claimed'), h('pre', {}, claimed));
  }
  const pushed = (c && c.payload && c.payload.push) || [];
  if (pushed.length) {
    sections.push(h('h4', {}, `Payload: ${pushed.length} segment${pushed.length === 1 ? '' : 's'} added (kept ${c.payload.keep})`));
    for (const seg of pushed) {
      const kind = seg.type || '';
      const cls = /VALIDATION_ERROR|WORKER_ERROR/.test(kind) ? 'segment error' : (/AGENT_OUTPUT/.test(kind) ? 'segment agent' : 'segment');
      sections.push(h('details', { class: cls, open: /ERROR|AGENT_OUTPUT/.test(kind) ? true : null },
        h('summary', {}, h('code', {}, kind), ' ', seg.id || ''),
        h('pre', {}, typeof seg.content === 'string' ? seg.content : JSON.stringify(seg.content, null, 2))));
    }
  }
  if (c && c.log && c.log.length) sections.push(h('h4', {}, 'Log'), h('pre', { class: 'log' }, c.log.join('\n')));
  for (const l of row.lanes) {
    if (l.log && l.log.length) sections.push(h('h4', {}, `Log of lane ${l.lane}`), h('pre', { class: 'log' }, l.log.join('\n')));
    if (l.summary) sections.push(h('h4', {}, `Summary of lane ${l.lane}`), h('pre', {}, l.summary));
  }
  for (const n of row.notes) sections.push(h('h4', {}, 'Checkpoint notes'), h('pre', { class: 'notes' }, n));
  if (row.telemetry.length) {
    sections.push(h('h4', {}, `Telemetry (${row.telemetry.length})`),
      h('ol', { class: 'telemetry' }, row.telemetry.map((t) => h('li', {}, t.lane ? `[${t.lane}] ` : '', h('code', {}, JSON.stringify(t.body))))));
  }
  sections.push(h('details', {}, h('summary', {}, `Raw events (${row.events.length})`), h('pre', {}, row.events.map((e) => JSON.stringify(e, null, 1)).join('\n'))));
  return h('aside', { class: 'detail', 'aria-label': `Details of step ${row.step}` }, sections);
}

// The result bundles the execution left in the workspace (exec and agent
// commands with their stdout and stderr), fetched when the step is opened.
const bundleCache = new Map();

function bundlesSection(row) {
  const key = `${view.run.id}/${row.step}/${row.block}`;
  const box = h('section', { class: 'bundles', 'aria-label': 'Result bundles' });
  const show = (found) => {
    if (!found.bundles.length && !found.unreadable.length) return;
    fill(box, h('h4', {}, `Result bundles (${found.bundles.length})`),
      found.bundles.map((b) => h('div', { class: 'bundle' },
        h('div', { class: 'muted' }, h('code', {}, b.dir)),
        b.commands.map((cmd) => {
          const c = cmd.command || {};
          const how = [c.exit_code !== undefined ? `exit ${c.exit_code}` : null, c.timed_out ? 'timed out' : null, c.error || null].filter(Boolean).join(', ');
          return h('div', { class: 'command' },
            h('code', { class: 'argv' }, `$ ${(c.argv || []).join(' ')}`, how ? `   (${how})` : ''),
            ['stdout', 'stderr'].map((k) => {
              const st = cmd[k];
              if (!st) return null;
              if (st.error) return h('div', { class: 'error' }, `${k}: cannot read it: ${st.error}`);
              if (!st.text) return h('div', { class: 'muted' }, `${k}: (empty)`);
              return h('details', { open: true, class: `stream ${k}` }, h('summary', {}, k, st.truncated ? ' (cut at 1 MiB)' : ''), h('pre', {}, st.text));
            }));
        }))),
      found.unreadable.map((u) => h('div', { class: 'error' }, u)));
  };
  if (bundleCache.has(key)) show(bundleCache.get(key));
  else {
    api(`/runs/${enc(view.run.id)}/bundles?step=${row.step}&block=${enc(row.block)}`)
      .then((found) => { bundleCache.set(key, found); show(found); })
      .catch(() => {});
  }
  return box;
}

function claimedFiles(artifact) {
  try {
    const out = JSON.parse(artifact);
    const parts = [];
    for (const key of ['created', 'modified', 'deleted', 'files_created', 'files_modified', 'files_deleted']) {
      if (Array.isArray(out[key]) && out[key].length) parts.push(`${key}: ${out[key].join(', ')}`);
    }
    return parts.join('\n');
  } catch { return ''; }
}

// ---------- acting ----------

function gatePanel(row) {
  const g = row.gate;
  const runId = view.run.id;
  const send = async (answer) => {
    try {
      await answerGate(runId, g.id, answer);
      await openRun(runId, view.branch);
    } catch (e) { failed(e); }
  };
  // What the user has typed or picked survives the page's live redraws.
  const draft = view.gateDraft.gate === g.id ? view.gateDraft : (view.gateDraft = { gate: g.id, text: '', lanes: {} });
  const text = h('textarea', { id: 'gate-text', rows: 3, 'aria-label': 'What should change', placeholder: 'What should change?', oninput: (ev) => { draft.text = ev.target.value; } });
  text.value = draft.text;
  const panel = [h('h3', {}, `Gate ${g.id} is waiting for you`), h('pre', { class: 'prompt' }, g.prompt || '')];
  if (g.kind === 'fan-in') {
    const open = row.conflicts.filter((c) => !c.appliedFrom);
    const choices = open.map((c) => {
      const sel = h('select', {
        'aria-label': `Lane for ${c.conflictingFile}`,
        dataset: { file: c.conflictingFile },
        onchange: (ev) => { draft.lanes[c.conflictingFile] = ev.target.value; },
      }, c.lanes.map((l) => h('option', { value: l }, l)));
      if (draft.lanes[c.conflictingFile]) sel.value = draft.lanes[c.conflictingFile];
      return h('label', { class: 'choice' }, h('code', {}, c.conflictingFile), ' from ', sel);
    });
    panel.push(h('div', { class: 'choices' }, choices),
      h('div', { class: 'buttons' },
        h('button', {
          type: 'button',
          class: 'primary',
          onclick: () => {
            const picks = [...document.querySelectorAll('.choices select')].map((s) => `${s.dataset.file}=${s.value}`);
            send(picks.length ? `use-lane:${picks.join(',')}` : 'resolved');
          },
        }, 'Apply these lanes')));
  } else {
    panel.push(text, approveOrChange(text, send));
  }
  return h('section', { class: 'gate-panel', 'aria-label': `Gate ${g.id}` }, panel);
}

// How a run ended, in words: `run succeeded`, `run failed: …`,
// `run cancelled by … : …`.
function finishedText(outcome) {
  if (outcome.status === 'succeeded') return 'run succeeded';
  if (outcome.status === 'cancelled') return `run cancelled by ${outcome.by}${outcome.reason ? `: ${outcome.reason}` : ''}`;
  return `run failed: ${outcome.reason}`;
}

async function cancelRun() {
  if (!confirm(`Cancel run ${view.run.id} for good?`)) return;
  try {
    await api(`/runs/${enc(view.run.id)}/cancel`, { json: { by: 'the dashboard', wait_s: 30 } });
    toast('Cancelled.');
    await openRun(view.run.id, view.branch);
  } catch (e) { failed(e); }
}

async function resumeRun() {
  try {
    await api(`/runs/${enc(view.run.id)}/resume`, { json: { branch: view.branch } });
    toast('Resumed.');
    await openRun(view.run.id, view.branch);
  } catch (e) { failed(e); }
}

async function forkAt(snapshot, step) {
  if (!confirm(`Start a new branch after step ${step} (${snapshot})?`)) return;
  try {
    const out = await api(`/runs/${enc(view.run.id)}/fork`, { json: { at: snapshot } });
    toast(`Branch ${out.branch} started.`);
    location.hash = `#/runs/${enc(view.run.id)}/branches/${out.branch}`;
  } catch (e) { failed(e); }
}

// ---------- live ----------

function setLive(text, kind) {
  const el = $('live');
  el.textContent = text;
  el.className = `live ${kind || ''}`;
}

function stopFollowing() {
  if (view.follow) view.follow.abort();
  view.follow = null;
  view.lastSeq = 0;
  view.shown = '';
  view.output = null;
  setLive('');
}

// The run's events as they are written, over the SSE stream (read with
// fetch, so a token can be sent); a dropped stream is taken up again
// from the last event seen.
function startFollowing(runId) {
  const ctl = new AbortController();
  view.follow = ctl;
  (async () => {
    let delay = 500;
    while (!ctl.signal.aborted) {
      try {
        const res = await fetch(`/v1/runs/${enc(runId)}/events/stream?output=true`, {
          headers: { ...authHeaders(), Accept: 'text/event-stream', 'Last-Event-ID': String(view.lastSeq) },
          signal: ctl.signal,
        });
        if (res.status === 401) { askToken(); return; }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        setLive('live', 'on');
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, '\n');
          let cut;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            onMessage(runId, block);
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      setLive('reconnecting…', 'off');
      await sleep(delay);
      delay = Math.min(delay * 2, 5000);
    }
  })();
}

let refreshTimer = null;

// The running block's output (`output` events: shown, never recorded):
// the last lines of its step, kept until the step completes.
const OUTPUT_TAIL = 8;
function onOutput(o) {
  if (typeof o.step !== 'number') return;
  if (!view.output || view.output.step !== o.step) view.output = { step: o.step, lines: [] };
  const lines = view.output.lines;
  if (o.skipped) lines.push({ text: `… ${o.skipped} lines skipped`, progress: true });
  else lines.push({ text: String(o.text ?? ''), stream: o.stream, progress: !!o.progress });
  lines.splice(0, Math.max(0, lines.length - OUTPUT_TAIL));
  scheduleRender();
}

// The lines of a block's log that are warnings or errors, without their
// level mark (as the API's `warnings`).
function warningsOf(log) {
  return (log || []).flatMap((l) => {
    const m = /^\[(warn|error)\] (.*)$/s.exec(String(l));
    return m ? [m[2]] : [];
  });
}

// What agent CLIs reported of a block's tokens, broken down.
function usageText(u) {
  const parts = [`in ${u.input_tokens || 0}`, `out ${u.output_tokens || 0}`];
  if (u.cache_read_tokens || u.cache_creation_tokens) parts.push(`cache ${u.cache_read_tokens || 0} read, ${u.cache_creation_tokens || 0} written`);
  if (u.cost_micro_usd) parts.push(`$${(u.cost_micro_usd / 1e6).toFixed(4)}`);
  return parts.join(' · ');
}

function isLive() {
  return view.liveStatus === 'running';
}

// Under the running block's row: how long it has run and its last lines.
function outputRow(row) {
  const o = view.output;
  const since = row.at ? Date.now() - row.at : 0;
  return h('tr', { class: 'output-row' }, h('td', {}), h('td', { colspan: 8 },
    h('div', { class: 'muted' }, `running for ${duration(since * 1000)}`),
    o && o.step === row.step && o.lines.length
      ? h('pre', { class: 'live-output', 'aria-label': `output of step ${row.step}` },
        o.lines.map((l) => h('div', { class: l.progress ? 'progress' : `stream-${l.stream}` }, l.progress ? `» ${l.text}` : l.text)))
      : null));
}

function onMessage(runId, block) {
  let data = '';
  let kind = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '');
    else if (line.startsWith('event:')) kind = line.slice(6).trim();
  }
  if (!data || !view.run || view.run.id !== runId) return;
  let e;
  try { e = JSON.parse(data); } catch { return; }
  if (kind === 'output') { onOutput(e); return; }
  if (typeof e.seq !== 'number' || e.seq <= view.lastSeq) return;
  view.lastSeq = e.seq;
  if (e.branch === view.branch) {
    view.events.push(e);
    scheduleRender();
  } else {
    $('main').dataset.lastSeq = String(view.lastSeq);
  }
  // What the header and the branch graph show changes with the log.
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshHead, 150);
}

async function refreshHead() {
  if (!view.run) return;
  const id = view.run.id;
  try {
    const [summary, branches] = await Promise.all([api(`/runs/${enc(id)}/summary`), api(`/runs/${enc(id)}/branches`)]);
    if (!view.run || view.run.id !== id) return;
    view.run = summary;
    view.branches = branches.branches;
    scheduleRender();
    const i = list.runs.findIndex((r) => r.id === id);
    if (i >= 0) { list.runs[i] = summary; renderRuns(); }
    // The log ended the run but the status read still says it runs (read
    // while its process let go): look again shortly.
    const last = view.events.length ? view.events[view.events.length - 1].event : null;
    const ended = last && (last.type === 'run_finished' || (last.type === 'action_taken' && ['end', 'fail'].includes(last.command && last.command.kind)));
    if (ended && summary.status === 'running') refreshTimer = setTimeout(refreshHead, 500);
  } catch (e) {
    // No event may come to try again: look again in a second (not when
    // asked for a token, or the run is gone).
    if (e && (e.status === 401 || e.status === 404)) return;
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refreshHead, 1000);
  }
}

// ---------- workflows: the list and a form to start a run ----------

const workflows = { root: null, list: [], loaded: false };

async function fetchWorkflows() {
  const body = await api('/workflows');
  workflows.root = body.root;
  workflows.list = body.workflows;
  workflows.truncated = body.truncated;
  workflows.loaded = true;
}

async function loadWorkflows() {
  const ul = $('workflow-list');
  try {
    await fetchWorkflows();
    ul.replaceChildren(...workflows.list.map(workflowItem));
    if (!workflows.list.length) ul.append(h('li', { class: 'none' }, 'No workflow files under the projects root.'));
    if (workflows.truncated) ul.append(h('li', { class: 'none' }, 'Only the first files found are listed.'));
  } catch (e) {
    if (e.status !== 401) ul.replaceChildren(h('li', { class: 'none error' }, e.message));
  }
}

function workflowItem(w) {
  const open = () => { location.hash = `#/workflows/${enc(w.path)}`; };
  if (w.error) {
    return h('li', { class: 'broken', dataset: { path: w.path }, title: w.error },
      h('div', { class: 'line1' }, h('span', { class: 'wf' }, w.path), h('span', { class: 'badge s-failed' }, 'invalid')),
      h('div', { class: 'line3 error' }, w.error));
  }
  return h('li', { dataset: { path: w.path }, tabindex: '0', onclick: open, onkeydown: (ev) => { if (ev.key === 'Enter') open(); } },
    h('div', { class: 'line1' }, h('span', { class: 'wf' }, w.id)),
    h('div', { class: 'line2' }, h('code', {}, w.path)),
    w.description ? h('div', { class: 'line3', title: w.description }, w.description) : null);
}

async function openWorkflow(path) {
  const main = $('main');
  main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  try {
    if (!workflows.loaded) await fetchWorkflows();
    const w = workflows.list.find((x) => x.path === path);
    if (!w) throw new Error(`no workflow ${path} under the projects root`);
    if (w.error) throw new Error(`${path}: ${w.error}`);
    fill(main, startForm(w));
  } catch (e) {
    main.replaceChildren(h('p', { class: 'error' }, e.message));
  }
}

// The kind of form control an input's schema asks for.
function fieldKind(p) {
  if (Array.isArray(p.enum) && p.enum.length) return 'enum';
  const type = Array.isArray(p.type) ? p.type.find((t) => t !== 'null') : p.type;
  if (type === 'array' && p.items && p.items.type === 'string') return 'lines';
  if (['string', 'number', 'integer', 'boolean'].includes(type)) return type;
  return 'json';
}

function inputControl(name, p, kind, id) {
  const attrs = { id, name, 'aria-describedby': `${id}-hint ${id}-error` };
  const d = p.default;
  switch (kind) {
    case 'enum': {
      const sel = h('select', attrs, p.default === undefined ? h('option', { value: '' }, '—') : null,
        p.enum.map((v) => h('option', { value: JSON.stringify(v) }, typeof v === 'string' ? v : JSON.stringify(v))));
      if (d !== undefined) sel.value = JSON.stringify(d);
      return sel;
    }
    case 'boolean': return h('input', { ...attrs, type: 'checkbox', checked: d === true });
    case 'lines': return h('textarea', { ...attrs, rows: 3, placeholder: 'one per line' }, Array.isArray(d) ? d.join('\n') : '');
    case 'json': return h('textarea', { ...attrs, rows: 3, placeholder: 'JSON' }, d === undefined ? '' : JSON.stringify(d));
    default: return h('input', { ...attrs, type: 'text', inputmode: kind === 'string' ? null : 'decimal', value: d === undefined ? '' : String(d) });
  }
}

function inputField(name, p, required, id = `input-${name}`) {
  const kind = fieldKind(p);
  const named = { lines: 'list of text, one a line', enum: 'one of the choices', json: 'JSON' };
  const facts = [named[kind] || kind, required ? 'required' : 'optional'];
  return h('div', { class: 'field', dataset: { input: name, kind } },
    h('label', { for: id }, name, required ? h('span', { class: 'required', title: 'required' }, ' *') : null),
    inputControl(name, p, kind, id),
    h('small', { id: `${id}-hint`, class: 'hint' }, p.description ? `${p.description} ` : '', h('span', { class: 'muted' }, `(${facts.join(', ')})`)),
    h('p', { id: `${id}-error`, class: 'field-error', role: 'alert' }));
}

// A field's value as the request carries it; undefined leaves it out.
// Numbers that do not parse go as text: the server says what is wrong.
function fieldValue(field) {
  const el = field.querySelector('input, select, textarea');
  const text = el.value;
  switch (field.dataset.kind) {
    case 'boolean': return el.checked;
    case 'enum': return text === '' ? undefined : JSON.parse(text);
    case 'lines': return text.trim() === '' ? undefined : text.split('\n').map((l) => l.trim()).filter(Boolean);
    case 'number': case 'integer': return text.trim() === '' ? undefined : (Number.isFinite(Number(text)) ? Number(text) : text);
    case 'json': try { return text.trim() === '' ? undefined : JSON.parse(text); } catch { return text; }
    default: return text === '' ? undefined : text;
  }
}

function startForm(w) {
  // The schema comes from a file on the server: anything may be in it.
  const schema = w.inputs && typeof w.inputs === 'object' ? w.inputs : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const properties = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
  const fields = Object.entries(properties).map(([name, p]) => inputField(name, p && typeof p === 'object' ? p : {}, required.has(name)));
  const workspace = inputField('workspace', { type: 'string', description: 'The directory on the server the run works in (absolute path).' }, true, 'start-workspace');
  delete workspace.dataset.input;
  workspace.id = 'workspace-field';
  const form = h('form', { class: 'start-form', novalidate: true, 'aria-label': `Start ${w.id}` },
    fields.length ? h('fieldset', {}, h('legend', {}, 'Inputs'), fields) : h('p', { class: 'muted' }, 'This workflow declares no inputs.'),
    workspace,
    h('p', { class: 'field-error form-error', role: 'alert' }),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Start run')));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); submitStart(w, form); });
  return h('section', { class: 'workflow-view' },
    h('header', { class: 'run-head' }, h('div', { class: 'title' },
      h('h2', {}, w.id, w.version ? h('span', { class: 'muted' }, ` ${w.version}`) : null),
      h('div', { class: 'meta' }, h('code', {}, w.path), w.description ? ` · ${w.description}` : ''))),
    form);
}

function showStartError(form, e) {
  for (const el of form.querySelectorAll('.field-error')) el.textContent = '';
  for (const el of form.querySelectorAll('.field.invalid')) el.classList.remove('invalid');
  const details = (e.body && e.body.details) || {};
  const problems = details.problems || (details.pointer ? [{ pointer: details.pointer, message: e.message }] : []);
  let shown = false;
  for (const p of problems) {
    const m = /^\/inputs\/([^/]+)/.exec(p.pointer || '');
    const name = m ? m[1].replace(/~1/g, '/').replace(/~0/g, '~') : null;
    const field = name !== null
      ? [...form.querySelectorAll('.field')].find((f) => f.dataset.input === name)
      : (p.pointer === '/workspace' ? form.querySelector('#workspace-field') : null);
    if (!field) continue;
    field.classList.add('invalid');
    field.querySelector('.field-error').textContent = p.message;
    shown = true;
  }
  if (!shown) form.querySelector('.form-error').textContent = e.message;
}

async function submitStart(w, form) {
  const inputs = {};
  for (const field of form.querySelectorAll('fieldset .field')) {
    const v = fieldValue(field);
    if (v !== undefined) inputs[field.dataset.input] = v;
  }
  const workspace = form.querySelector('#workspace-field input').value.trim();
  const body = { workflow: `${workflows.root.replace(/\/$/, '')}/${w.path}`, inputs };
  if (workspace) body.workspace = workspace;
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    const started = await api('/runs', { json: body });
    toast(`Started ${started.run_id}`);
    showTab('runs');
    location.hash = `#/runs/${enc(started.run_id)}`;
    loadRuns(true);
  } catch (e) {
    if (e instanceof ApiError) showStartError(form, e); else failed(e);
  } finally {
    button.disabled = false;
  }
}

// ---------- gates waiting for you, across runs ----------

async function answerGate(runId, gateId, answer) {
  await api(`/runs/${enc(runId)}/gates/${enc(gateId)}`, { json: { answer } });
  toast(`Gate ${gateId}: ${answer}`);
}

async function countGates() {
  try {
    const { gates } = await api('/gates');
    $('gate-count').textContent = gates.length ? String(gates.length) : '';
  } catch { /* the next tick tries again */ }
}

async function loadGates() {
  const ul = $('gate-list');
  try {
    const { gates } = await api('/gates');
    $('gate-count').textContent = gates.length ? String(gates.length) : '';
    ul.replaceChildren(...gates.map((g) => h('li', { onclick: () => { location.hash = `#/runs/${enc(g.run_id)}`; } },
      h('div', { class: 'line1' }, h('span', { class: 'wf' }, g.workflow_id), h('span', { class: 'badge s-waiting' }, g.gate_id)),
      h('div', { class: 'line3' }, h('code', {}, g.run_id), ` · ${ago(g.opened_at)}`))));
    if (!gates.length) ul.append(h('li', { class: 'none' }, 'No gate is waiting.'));
  } catch (e) {
    if (e.status !== 401) failed(e);
  }
}

// Once the run has recorded the answer, the gate is no longer open.
async function gateClosed(g) {
  for (let i = 0; i < 40; i++) {
    const { gates } = await api('/gates');
    if (!gates.some((x) => x.run_id === g.run_id && x.gate_id === g.gate_id)) return;
    await sleep(250);
  }
}

function gateCard(g) {
  const text = h('textarea', { rows: 2, 'aria-label': `What should change (${g.gate_id}, ${g.run_id})`, placeholder: 'What should change?' });
  const send = async (answer) => {
    try {
      await answerGate(g.run_id, g.gate_id, answer);
      await gateClosed(g);
      await openGates();
    } catch (e) { failed(e); }
  };
  return h('li', { class: 'gate-card', dataset: { run: g.run_id, gate: g.gate_id } },
    h('div', { class: 'gate-meta' },
      h('strong', {}, g.workflow_id), ' ', h('span', { class: 'badge s-waiting' }, g.gate_id),
      ' · ', h('a', { href: `#/runs/${enc(g.run_id)}${g.branch > 1 ? `/branches/${g.branch}` : ''}` }, h('code', {}, g.run_id)),
      g.branch > 1 ? ` branch ${g.branch}` : '',
      ' · ', h('code', {}, `${g.node}.${g.block}`),
      ' · waiting ', h('time', { title: stamp(g.opened_at) }, ago(g.opened_at))),
    h('pre', { class: 'prompt' }, g.prompt || ''),
    g.kind === 'fan-in' ? fanInNote(g) : gateAnswers(g, text, send));
}

// A fan-in gate's lanes are picked where the lanes are shown.
function fanInNote(g) {
  return h('p', { class: 'muted' }, 'Lanes changed the same files: ',
    h('a', { href: `#/runs/${enc(g.run_id)}${g.branch > 1 ? `/branches/${g.branch}` : ''}` }, 'pick the lane each file comes from on the run\'s page'), '.');
}

function gateAnswers(g, text, send) {
  return [text, approveOrChange(text, send, h('a', { href: `#/runs/${enc(g.run_id)}`, class: 'button-link' }, 'Open the run'))];
}

// An ordinary gate's two answers (after `first`, when given): approve, or
// request the changes the text box says.
function approveOrChange(text, send, first) {
  return h('div', { class: 'buttons' },
    first || null,
    h('button', { type: 'button', class: 'primary', onclick: () => send('approved') }, 'Approve'),
    h('button', {
      type: 'button',
      onclick: () => {
        const t = text.value.trim();
        if (!t) { toast('Say what should change first.', 'error'); text.focus(); return; }
        send(`changes-requested:${t}`);
      },
    }, 'Request changes'));
}

async function openGates() {
  const main = $('main');
  try {
    const { gates } = await api('/gates');
    gates.sort((a, b) => a.opened_at - b.opened_at);
    $('gate-count').textContent = gates.length ? String(gates.length) : '';
    fill(main,
      h('header', { class: 'run-head' }, h('h2', {}, 'Gates waiting for you')),
      gates.length
        ? h('ul', { class: 'gate-cards', 'aria-label': 'Open gates, oldest first' }, gates.map(gateCard))
        : h('p', { class: 'muted' }, 'No gate is waiting for an answer.'));
    loadGates();
  } catch (e) {
    main.replaceChildren(h('p', { class: 'error' }, e.message));
  }
}

// ---------- the workflow graph, with the branch's path on it ----------

const definitions = new Map(); // run id -> the pinned definition (or null)

async function loadDefinition(runId) {
  if (definitions.has(runId)) return;
  try {
    definitions.set(runId, (await api(`/runs/${enc(runId)}/definition`)).definition);
  } catch {
    definitions.set(runId, null);
  }
}

// The target block of an action from `node`, or null (END, FAIL, GATE…).
function actionTarget(def, node, action) {
  const [verb, arg] = [action.split(':')[0], action.slice(action.indexOf(':') + 1).trim()];
  const entry = (n) => (def.nodes[n] ? `${n}.${def.nodes[n].entry_block}` : null);
  if (verb === 'CALL') return entry(arg.split('@')[0]);
  if (verb !== 'JUMP' || !action.includes(':')) return null;
  if (arg.includes('.')) return arg;
  if (def.nodes[node] && def.nodes[node].blocks && def.nodes[node].blocks[arg]) return `${node}.${arg}`;
  return entry(arg);
}

// Blocks and labeled edges of a definition.
function graphOf(def) {
  const blocks = [];
  const edges = new Map(); // "from>to" -> {from, to, labels}
  for (const [node, n] of Object.entries(def.nodes || {})) {
    for (const [block, b] of Object.entries(n.blocks || {})) {
      const id = `${node}.${block}`;
      blocks.push(id);
      for (const t of (b && b.transitions) || []) {
        const to = actionTarget(def, node, String(t.action || ''));
        if (!to) continue;
        const key = `${id}>${to}`;
        if (!edges.has(key)) edges.set(key, { from: id, to, labels: [] });
        edges.get(key).labels.push(String(t.on_signal || '').replace('SIGNAL:', ''));
      }
    }
  }
  return { blocks, edges: [...edges.values()] };
}

// Layers by distance from the start block; wide layers wrap into rows.
function layout(def, g, perRow) {
  const start = def.nodes && def.nodes[def.start_node] ? `${def.start_node}.${def.nodes[def.start_node].entry_block}` : g.blocks[0];
  const depth = new Map([[start, 0]]);
  const queue = [start];
  while (queue.length) {
    const b = queue.shift();
    for (const e of g.edges) {
      if (e.from === b && !depth.has(e.to) && g.blocks.includes(e.to)) { depth.set(e.to, depth.get(b) + 1); queue.push(e.to); }
    }
  }
  const last = Math.max(0, ...depth.values());
  for (const b of g.blocks) if (!depth.has(b)) depth.set(b, last + 1);
  const layers = [];
  for (const b of g.blocks) (layers[depth.get(b)] = layers[depth.get(b)] || []).push(b);
  const rows = layers.filter(Boolean).flatMap((l) => Array.from({ length: Math.ceil(l.length / perRow) }, (_, i) => l.slice(i * perRow, (i + 1) * perRow)));
  const pos = new Map();
  rows.forEach((row, r) => row.forEach((b, i) => pos.set(b, { row: r, col: i, of: row.length })));
  return { pos, rows: rows.length };
}

// The executed blocks of the loaded branch, in order.
function executedPath(rows) {
  return rows.filter((r) => r.kind === 'block' && r.block).map((r) => r.block);
}

// An SVG element; strings among `kids` become text nodes.
function svgEl(tag, attrs, ...kids) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const k of kids) el.append(typeof k === 'string' ? document.createTextNode(k) : k);
  return el;
}

const BOX = { W: 170, H: 38, GX: 30, GY: 56, PER_ROW: 5, LABELS: 90 };

// One transition: its curve, and its label (drawn later, over the boxes).
// A label sits where its edge enters the target, in the gap between
// rows (where no box is): above the target for an edge going down, right
// of the bend below it for one going back.
function edgeShape(e, a, b, walked) {
  const { W, H } = BOX;
  const self = e.from === e.to;
  const down = b.y > a.y;
  const [x1, y1] = self ? [a.x + W, a.y + 10] : [a.x + W / 2, down ? a.y + H : a.y];
  const [x2, y2] = self ? [a.x + W, a.y + H - 10] : [b.x + W / 2, down ? b.y : b.y + H];
  const bend = self ? 40 : (down ? 0 : 60);
  const d = `M${x1},${y1} C${x1 + bend},${y1 + (down ? 20 : -20)} ${x2 + bend},${y2 + (down ? -20 : 20)} ${x2},${y2}`;
  const forward = down && !self;
  const t = forward ? (y2 - 16 - y1) / (y2 - y1) : 0;
  return {
    path: svgEl('path', { d, class: `edge ${walked ? 'walked' : ''}`, 'marker-end': 'url(#arrow)' }),
    label: svgEl('text', {
      x: forward ? x1 + (x2 - x1) * t : x2 + bend * 0.6 + 6,
      y: forward ? y2 - 12 : y2 + (self ? -8 : 14),
      class: 'edge-label',
      'text-anchor': forward ? 'middle' : 'start',
    }, e.labels.join(', ')),
  };
}

// One block: its box, name, and the steps it ran at on this branch.
function blockShape(b, p, seen, mark) {
  const { W, H } = BOX;
  const name = b.length > 22 ? `${b.slice(0, 21)}…` : b;
  return svgEl('g', { class: ['block', seen ? 'visited' : '', mark || ''].join(' '), 'data-block': b, 'data-order': seen ? seen.join(',') : null },
    svgEl('title', {}, `${b}${seen ? `: step ${seen.join(', ')} of this branch` : ': not executed'}`),
    svgEl('rect', { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
    svgEl('text', { x: p.x + 8, y: p.y + 16, class: 'block-name' }, name),
    seen ? svgEl('text', { x: p.x + 8, y: p.y + 31, class: 'block-order' }, `#${seen.slice(0, 4).join(', #')}${seen.length > 4 ? ' …' : ''}`) : '');
}

// The branch's path: each block's positions in it, the transitions taken,
// and how its last block is marked (current while live, or failed).
function pathMarks(rows, status) {
  const path = executedPath(rows);
  const order = new Map();
  path.forEach((b, i) => order.set(b, [...(order.get(b) || []), i + 1]));
  const walked = new Set(path.slice(1).map((b, i) => `${path[i]}>${b}`));
  const mark = status === 'failed' ? 'failed' : (['running', 'waiting', 'sleeping', 'interrupted'].includes(status) ? 'current' : null);
  return { length: path.length, order, walked, last: path[path.length - 1], mark };
}

function workflowGraph(rows, status) {
  const def = view.run && definitions.get(view.run.id);
  if (!def || !def.nodes) return null;
  const g = graphOf(def);
  if (!g.blocks.length) return null;
  const { W, H, GX, GY, PER_ROW, LABELS } = BOX;
  const { pos, rows: nRows } = layout(def, g, PER_ROW);
  const width = Math.max(1, ...[...pos.values()].map((p) => p.of)) * (W + GX) + GX + LABELS;
  const at = (b) => { const p = pos.get(b); const x0 = (width - LABELS - p.of * (W + GX) + GX) / 2; return { x: x0 + p.col * (W + GX), y: 16 + p.row * (H + GY) }; };
  const marks = pathMarks(rows, status);
  const height = 32 + nRows * (H + GY) - GY;
  const out = svgEl('svg', { class: 'wf-graph', width, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `Workflow graph: ${g.blocks.length} blocks, ${marks.length} executed` },
    svgEl('defs', {}, svgEl('marker', { id: 'arrow', viewBox: '0 0 8 8', refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, svgEl('path', { d: 'M0,0 L8,4 L0,8 z', class: 'arrow-head' }))));
  const edges = g.edges.filter((e) => pos.has(e.to)).map((e) => edgeShape(e, at(e.from), at(e.to), marks.walked.has(`${e.from}>${e.to}`)));
  out.append(...edges.map((e) => e.path));
  for (const b of g.blocks) out.append(blockShape(b, at(b), marks.order.get(b), b === marks.last ? marks.mark : null));
  out.append(...edges.map((e) => e.label));
  return h('details', { class: 'graph-panel', open: view.graphOpen !== false, ontoggle: (ev) => { view.graphOpen = ev.target.open; } },
    h('summary', {}, `Workflow graph (${g.blocks.length} blocks)`),
    h('div', { class: 'graph-scroll' }, out));
}

// ---------- routing, keys, theme ----------

function route() {
  const hash = location.hash || '#/';
  let m;
  if ((m = /^#\/runs\/([^/]+)(?:\/branches\/(\d+))?$/.exec(hash))) {
    openRun(decodeURIComponent(m[1]), m[2] ? Number(m[2]) : undefined);
  } else if ((m = /^#\/sessions\/(.+)$/.exec(hash))) {
    showTab('sessions');
    openSession(decodeURIComponent(m[1]));
  } else if ((m = /^#\/workflows\/(.+)$/.exec(hash))) {
    leaveRun();
    showTab('workflows');
    openWorkflow(decodeURIComponent(m[1]));
  } else if ((m = /^#\/schedules\/(.+)$/.exec(hash))) {
    showTab('schedules');
    openSchedule(decodeURIComponent(m[1]));
  } else if (hash === '#/gates') {
    leaveRun();
    showTab('gates');
    openGates();
  } else {
    leaveRun();
    $('main').replaceChildren(h('div', { class: 'empty' }, h('p', {}, 'Select a run on the left, or press ', h('kbd', {}, 'j'), ' / ', h('kbd', {}, 'k'), ' and ', h('kbd', {}, 'Enter'), '.')));
  }
}

function leaveRun() {
  stopFollowing();
  view.run = null;
}

const TABS = ['runs', 'sessions', 'workflows', 'gates', 'schedules'];

function showTab(which) {
  for (const t of TABS) {
    $(`tab-${t}`).setAttribute('aria-selected', String(t === which));
    $(`${t}-panel`).hidden = t !== which;
  }
  if (which === 'sessions') loadSessions();
  if (which === 'workflows') loadWorkflows();
  if (which === 'gates') loadGates();
  if (which === 'schedules') loadSchedules();
}

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function toggleTheme() {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  const next = dark ? 'light' : 'dark';
  localStorage.setItem(THEME_KEY, next);
  applyTheme(next);
}

function stepTo(delta) {
  const trs = [...$('main').querySelectorAll('tr.step')];
  if (!trs.length) return;
  let i = trs.findIndex((t) => t.classList.contains('selected'));
  i = i < 0 ? (delta > 0 ? 0 : trs.length - 1) : Math.max(0, Math.min(trs.length - 1, i + delta));
  selectRow(Number(trs[i].dataset.seq));
}

function onKey(ev) {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) || ev.target.isContentEditable;
  if (ev.key === 'Escape' && typing) { ev.target.blur(); return; }
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  switch (ev.key) {
    case '/': ev.preventDefault(); $('filter-q').focus(); break;
    case 'j': case 'ArrowDown': if (ev.target.closest && ev.target.closest('#run-list') || ev.key === 'j') { ev.preventDefault(); moveCursor(1); } break;
    case 'k': case 'ArrowUp': if (ev.target.closest && ev.target.closest('#run-list') || ev.key === 'k') { ev.preventDefault(); moveCursor(-1); } break;
    case 'Enter':
      if (ev.target.closest && ev.target.closest('#run-list') && list.runs[list.selected]) openRun(list.runs[list.selected].id);
      break;
    case 'n': stepTo(1); break;
    case 'p': stepTo(-1); break;
    case 'b':
      if (view.run && view.branches.length > 1) {
        const i = view.branches.findIndex((b) => b.branch === view.branch);
        location.hash = `#/runs/${enc(view.run.id)}/branches/${view.branches[(i + 1) % view.branches.length].branch}`;
      }
      break;
    case 't': toggleTheme(); break;
    case '?': $('help-dialog').showModal(); break;
    default:
  }
}

function init() {
  applyTheme(localStorage.getItem(THEME_KEY));
  $('theme-button').addEventListener('click', toggleTheme);
  $('help-button').addEventListener('click', () => $('help-dialog').showModal());
  $('token-button').addEventListener('click', askToken);
  $('token-form').addEventListener('submit', (ev) => {
    if (ev.submitter && ev.submitter.value === 'save') {
      const t = $('token-input').value.trim();
      if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
      $('token-input').value = '';
      setTimeout(() => { loadRuns(true); route(); }, 0);
    }
  });
  $('tab-runs').addEventListener('click', () => showTab('runs'));
  $('tab-sessions').addEventListener('click', () => showTab('sessions'));
  $('tab-workflows').addEventListener('click', () => showTab('workflows'));
  $('tab-schedules').addEventListener('click', () => showTab('schedules'));
  $('tab-gates').addEventListener('click', () => { if (location.hash === '#/gates') route(); else location.hash = '#/gates'; });
  let typingTimer = null;
  const refilter = () => { clearTimeout(typingTimer); typingTimer = setTimeout(() => { list.selected = -1; loadRuns(true); }, 150); };
  $('filter-q').addEventListener('input', refilter);
  $('filter-workflow').addEventListener('input', refilter);
  $('filter-status').addEventListener('change', refilter);
  $('filters').addEventListener('submit', (ev) => ev.preventDefault());
  $('more-runs').addEventListener('click', () => loadRuns(false));
  document.addEventListener('keydown', onKey);
  window.addEventListener('hashchange', route);
  loadRuns(true);
  route();
  setInterval(refreshRuns, 5000);
  countGates();
  setInterval(countGates, 10000);
}

document.addEventListener('DOMContentLoaded', init);
