// troupe's page. It reads the /v1 GET endpoints of the listener that
// served it and waits for changes with a blocking query on /v1/jobs
// (?index=N&wait=30s, answered when the state index passes N, with the
// new index in X-Troupe-Index); then it re-reads the nodes, partitions,
// fair share and the selected job. Everything from the server is written
// with textContent: job names are user input.
//
// A user who logs in (POST /login with one of their tokens; the session
// is an HttpOnly cookie) submits job files (POST /submit), kills, holds
// and releases their jobs (POST /v1/jobs/ID/kill, …) and opens a job's
// terminal (terminal.js). Every write carries the session's CSRF token
// in the X-Troupe-CSRF header, which GET /session answers.
'use strict';

const S = {
  jobs: [], nodes: [], parts: null, fs: null, job: null, resv: [],
  index: 0, written: 0, selected: 0, skew: 0, lastOK: 0,
  me: null, // the session: { user, uid, admin, csrf }, or null
  armed: 0, armTimer: 0, // the job whose Kill was clicked once
};

// ---- helpers

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function td(text, cls) { return el('td', cls, text); }

function stateBadge(s) { return el('span', 'state ' + s, s); }

function sleep(ms) { return new Promise(r => setTimeout(r, ms)); }

function now() { return Date.now() + S.skew; }

// elapsed is bqueue's TIME: [D-]H:MM:SS or M:SS.
function elapsed(ms) {
  let s = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(s / 86400); s %= 86400;
  const h = Math.floor(s / 3600); s %= 3600;
  const m = Math.floor(s / 60); s %= 60;
  const p = x => String(x).padStart(2, '0');
  if (d > 0) return `${d}-${p(h)}:${p(m)}:${p(s)}`;
  if (h > 0) return `${h}:${p(m)}:${p(s)}`;
  return `${m}:${p(s)}`;
}

function durNS(ns) { return ns > 0 ? elapsed(ns / 1e6) : '-'; }

function num(x, prec) {
  let s = Number(x || 0).toFixed(prec);
  if (s.includes('.')) s = s.replace(/0+$/, '').replace(/\.$/, '');
  return s === '-0' ? '0' : s;
}

function cores(milli) { return num(milli / 1000, 3); }
function gib(b) { return b > 0 && b < (1 << 30) / 20 ? '<0.1' : num(b / (1 << 30), 1); }

function ts(t) {
  if (!t || t.startsWith('0001-')) return '-';
  const d = new Date(t);
  return d.toLocaleString(undefined, { hour12: false });
}

function terminal(s) { return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL'].includes(s); }
function started(j) { return j.started && !j.started.startsWith('0001-'); }

// jobTime is bqueue's TIME: run time of an ended job, time since start
// of a started one, time since submission otherwise.
function jobTime(j) {
  if (terminal(j.state)) {
    if (!started(j)) return 0;
    const end = j.ended ? Date.parse(j.ended) : now();
    return end - Date.parse(j.started);
  }
  if (started(j)) return now() - Date.parse(j.started);
  return now() - Date.parse(j.submitted);
}

function jobReason(j) {
  return (j.state === 'PENDING' || j.state === 'HELD' || terminal(j.state)) ? (j.reason || '') : '';
}

function jobSize(j) { return (j.containers && j.containers.length) || (j.spec.cluster && j.spec.cluster.size) || 0; }

function jobNodes(j) {
  const out = [];
  for (const c of j.containers || []) if (c.node && !out.includes(c.node)) out.push(c.node);
  return out;
}

// jobRef is how bqueue names a job: an array element as 12[5], a job
// array's own row as 12[1-100] (its counts show in the reason column).
function jobRef(j) {
  if (j.array_id) return `${j.array_id}[${j.array_index || 0}]`;
  if (j.array) return `${j.id}[${j.spec.array ? j.spec.array.range : ''}]`;
  return String(j.id);
}

// arrayCounts is a job array's elements by state: "90 PENDING, 10 RUNNING".
function arrayCounts(j) {
  if (!j.array || !j.array.states) return '';
  return Object.entries(j.array.states).map(([s, n]) => `${n} ${s}`).join(', ');
}

function account(j) { return j.account || j.spec.account || ''; }

// sortQueue is bqueue's order: started jobs, pending ones by priority
// (highest first, then queue position), then held and ended ones; each
// group by id.
function sortQueue(jobs) {
  const group = j => j.state === 'PENDING' ? 1 : j.state === 'HELD' ? 2 : terminal(j.state) ? 3 : 0;
  return jobs.slice().sort((a, b) => {
    const g = group(a) - group(b);
    if (g) return g;
    if (group(a) === 1) {
      const p = (b.priority || 0) - (a.priority || 0);
      if (p) return p;
      const q = (a.queue_position || 0) - (b.queue_position || 0);
      if (q) return q;
    }
    return a.id - b.id;
  });
}

// ---- fetching

async function getJSON(path) {
  const r = await fetch(path, { cache: 'no-store', credentials: 'same-origin' });
  const date = r.headers.get('Date');
  if (date) S.skew = Date.parse(date) - Date.now();
  let body = null;
  try { body = await r.json(); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const err = new Error((body && body.error) || `${path}: HTTP ${r.status}`);
    err.status = r.status;
    throw err;
  }
  return { body, index: Number(r.headers.get('X-Troupe-Index')) || (body && body.index) || 0 };
}

async function refreshRest() {
  const [n, p, f, r] = await Promise.all([getJSON('/v1/nodes'), getJSON('/v1/partitions'), getJSON('/v1/fairshare'),
    getJSON('/v1/reservations')]);
  S.nodes = n.body.nodes || [];
  S.resv = r.body.reservations || [];
  S.parts = p.body;
  S.fs = f.body;
  await refreshJob();
}

async function refreshJob() {
  if (!S.selected) { S.job = null; return; }
  try {
    S.job = (await getJSON('/v1/jobs/' + S.selected)).body;
  } catch (e) {
    if (e.status !== 404) throw e;
    S.job = { missing: true, id: S.selected };
  }
}

// loop keeps the page current: one blocking query at a time. After a
// change it reads once more shortly after, without blocking, to pick up
// what the scheduling pass worked out meanwhile (priorities, positions).
async function loop() {
  let settle = false;
  for (;;) {
    try {
      const q = S.index && !settle ? `/v1/jobs?index=${S.index}&wait=30s` : '/v1/jobs';
      const kicked = new Promise(r => { kicker = () => r(null); });
      const got = await Promise.race([getJSON(q), kicked]);
      kicker = null;
      if (!got) { settle = false; continue; }
      const { body, index } = got;
      const changed = index !== S.index;
      S.jobs = body.jobs || [];
      S.index = index;
      await refreshRest();
      S.lastOK = Date.now();
      render();
      setLive(true);
      if (changed && !settle) {
        settle = true;
        await sleep(700);
      } else {
        settle = false;
      }
      // An empty state has index 0, which does not block: poll.
      if (!S.index) await sleep(1000);
    } catch (e) {
      setLive(false, e.message);
      await sleep(2000);
    }
  }
}

function setLive(ok, msg) {
  const l = document.getElementById('live');
  l.className = 'live ' + (ok ? 'ok' : 'err');
  l.textContent = ok ? `live · index ${S.index}` : 'disconnected';
  l.title = ok ? 'updates as the state changes' : String(msg || '');
}

// post sends a write of the session: JSON in and out, the CSRF header.
async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST', cache: 'no-store', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-Troupe-CSRF': S.me ? S.me.csrf : '' },
    body: body === undefined ? '' : JSON.stringify(body),
  });
  let out = null;
  try { out = await r.json(); } catch (e) { /* not JSON */ }
  if (r.status === 401) await refreshSession();
  if (!r.ok) throw new Error((out && out.error) || `${path}: HTTP ${r.status}`);
  return out;
}

// ---- the session

async function refreshSession() {
  try {
    const { body } = await getJSON('/session');
    S.me = body && body.user ? body : null;
  } catch (e) {
    S.me = null;
  }
  renderSession();
}

function renderSession() {
  const on = !!S.me;
  document.getElementById('who').textContent = on ? `${S.me.user}${S.me.admin ? ' (admin)' : ''}` : '';
  document.getElementById('login-open').hidden = on;
  document.getElementById('logout').hidden = !on;
  document.getElementById('submit-section').hidden = !on;
  if (on) document.getElementById('login-form').hidden = true;
  if (!on) { Term.close(); stopOutput(); }
  renderDetail();
}

async function login(ev) {
  ev.preventDefault();
  const input = document.getElementById('login-token');
  const msg = document.getElementById('login-msg');
  msg.textContent = '';
  try {
    const r = await fetch('/login', {
      method: 'POST', cache: 'no-store', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token: input.value.trim() }),
    });
    const out = await r.json();
    if (!r.ok) throw new Error(out.error || `HTTP ${r.status}`);
    input.value = '';
    S.me = out;
    renderSession();
    kick();
  } catch (e) {
    msg.textContent = e.message;
  }
}

async function logout() {
  try { await post('/logout'); } catch (e) { /* gone anyway */ }
  S.me = null;
  renderSession();
  kick();
}

// kick re-reads everything now: what a session sees differs. After a
// write the read is a blocking query for the write's index, answered as
// soon as this server holds the write (at once when it already does).
let kicker = null;
function kick() { S.index = Math.max(0, S.written - 1); if (kicker) kicker(); }

// ---- writes

function mine(j) { return !!(S.me && j && (S.me.admin || j.uid === S.me.uid)); }

async function submitJob() {
  const msg = document.getElementById('submit-msg');
  const file = document.getElementById('job-file');
  msg.className = 'submit-msg';
  msg.textContent = 'submitting…';
  try {
    const res = await post('/submit', {
      name: file.files.length ? file.files[0].name : 'job.hcl',
      source: document.getElementById('job-source').value,
      interactive: document.getElementById('job-interactive').checked,
      hold: document.getElementById('job-hold').checked,
      request_id: crypto.randomUUID ? crypto.randomUUID() : '',
    });
    msg.textContent = `Job <${res.job_id}> is submitted to partition <${res.partition}>.`;
    kick();
    select(res.job_id);
  } catch (e) {
    msg.className = 'submit-msg err';
    msg.textContent = e.message;
  }
}

async function readJobFile() {
  const f = document.getElementById('job-file').files[0];
  if (f) document.getElementById('job-source').value = await f.text();
}

async function control(id, what) {
  const msg = document.getElementById('action-msg');
  try {
    const j = await post(`/v1/jobs/${id}/${what}`);
    if (S.selected === id) S.job = j;
    if (msg) msg.textContent = '';
    kick();
  } catch (e) {
    const m = document.getElementById('action-msg');
    if (m) m.textContent = e.message;
  }
}

// ---- output: GET /v1/jobs/ID/output streams what bpeek -f prints.

let following = null; // the AbortController of the output shown

async function followOutput(id) {
  stopOutput();
  const ctl = new AbortController();
  following = ctl;
  const pre = document.getElementById('output');
  const status = document.getElementById('output-status');
  document.getElementById('output-section').hidden = false;
  document.getElementById('output-title').textContent = `Output: job ${id} main1`;
  pre.textContent = '';
  status.textContent = 'following…';
  try {
    const r = await fetch(`/v1/jobs/${id}/output?host=main1`, { cache: 'no-store', credentials: 'same-origin', signal: ctl.signal });
    if (!r.ok) {
      let msg = `HTTP ${r.status}`;
      try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    const rd = r.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await rd.read();
      if (done) break;
      const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(document.createTextNode(dec.decode(value, { stream: true })));
      if (stick) pre.scrollTop = pre.scrollHeight;
    }
    if (following === ctl) status.textContent = 'the job has ended';
  } catch (e) {
    if (following === ctl) status.textContent = ctl.signal.aborted ? '' : e.message;
  }
}

function stopOutput() {
  if (following) following.abort();
  following = null;
  document.getElementById('output-section').hidden = true;
}

function outputButton(j) {
  const b = el('button', 'act', 'Output');
  b.id = 'act-output';
  b.type = 'button';
  b.addEventListener('click', () => followOutput(j.id));
  return b;
}

// actions are the buttons for the selected job: the owner's (or an
// admin's) kill, hold, release and terminal.
function actions(j) {
  const bar = el('div');
  bar.id = 'actions';
  if (!mine(j)) return bar;
  if (terminal(j.state)) {
    if (!j.interactive) bar.append(outputButton(j));
    return bar;
  }
  const button = (id, label, fn, cls) => {
    const b = el('button', 'act' + (cls ? ' ' + cls : ''), label);
    b.id = id;
    b.type = 'button';
    b.addEventListener('click', fn);
    bar.append(b);
    return b;
  };
  if (j.interactive && j.state === 'RUNNING') button('act-terminal', 'Terminal', () => Term.open(j.id));
  if (!j.interactive) bar.append(outputButton(j));
  if (j.state === 'PENDING') button('act-hold', 'Hold', () => control(j.id, 'hold'));
  if (j.state === 'HELD') button('act-release', 'Release', () => control(j.id, 'release'));
  // Kill asks twice: the first click arms it for a few seconds (across
  // re-renders of the detail).
  const kill = button('act-kill', S.armed === j.id ? 'Really kill?' : 'Kill', () => {
    clearTimeout(S.armTimer);
    if (S.armed === j.id) { S.armed = 0; control(j.id, 'kill'); return; }
    S.armed = j.id;
    kill.textContent = 'Really kill?';
    S.armTimer = setTimeout(() => { S.armed = 0; renderDetail(); }, 4000);
  }, 'danger');
  bar.append(el('span', 'msg', ''));
  bar.lastChild.id = 'action-msg';
  return bar;
}

// ---- rendering

function render() {
  renderSummary();
  renderQueue();
  renderNodes();
  renderReservations();
  renderPartitions();
  renderFairShare();
  renderDetail();
}

function renderSummary() {
  const count = s => S.jobs.filter(j => j.state === s).length;
  const up = S.nodes.filter(n => n.state === 'UP').length;
  document.getElementById('summary').textContent =
    `${count('RUNNING')} running · ${count('PENDING')} pending · ${count('HELD')} held · ${up}/${S.nodes.length} nodes up`;
}

function queueRows() {
  const f = document.getElementById('filter').value.trim().toLowerCase();
  const ended = document.getElementById('show-ended').checked;
  return sortQueue(S.jobs).filter(j => {
    if (!ended && terminal(j.state)) return false;
    if (!f) return true;
    return [jobRef(j), j.user, account(j), j.partition, j.name, j.state, jobReason(j), ...jobNodes(j)]
      .some(v => String(v || '').toLowerCase().includes(f));
  });
}

function renderQueue() {
  const tb = document.querySelector('#queue tbody');
  const rows = queueRows();
  const frag = document.createDocumentFragment();
  for (const j of rows) {
    const tr = el('tr');
    tr.id = 'job-' + j.id;
    tr.dataset.id = j.id;
    if (j.id === S.selected) tr.classList.add('selected');
    tr.append(
      td(jobRef(j), 'num'),
      td(j.state === 'PENDING' && j.queue_position > 0 ? j.queue_position : '', 'num'),
      td(j.user), td(account(j)), td(j.partition), td(j.name, 'name'));
    const st = td(''); st.append(stateBadge(j.state)); tr.append(st);
    const t = td(elapsed(jobTime(j)), 'num time');
    tr.append(td(jobSize(j), 'num'), td(jobNodes(j).join(',')), t, td(j.array ? arrayCounts(j) : jobReason(j)));
    tr.addEventListener('click', () => select(j.id));
    frag.append(tr);
  }
  tb.replaceChildren(frag);
  document.getElementById('queue-empty').hidden = rows.length > 0;
}

// tick updates the TIME column between refreshes.
function tick() {
  const byID = new Map(S.jobs.map(j => [String(j.id), j]));
  for (const tr of document.querySelectorAll('#queue tbody tr')) {
    const j = byID.get(tr.dataset.id);
    const c = tr.querySelector('td.time');
    if (j && c) c.textContent = elapsed(jobTime(j));
  }
}

function usage(alloc, total, show) {
  const c = td('');
  const bar = el('span', 'bar');
  const fill = el('span');
  fill.style.width = (total > 0 ? Math.min(100, 100 * alloc / total) : 0) + '%';
  bar.append(fill);
  c.append(bar, document.createTextNode(show));
  return c;
}

function renderNodes() {
  const tb = document.querySelector('#nodes tbody');
  const frag = document.createDocumentFragment();
  for (const n of S.nodes.slice().sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) {
    const tr = el('tr');
    tr.id = 'node-' + n.name;
    const st = td(''); st.append(stateBadge(n.state));
    const cap = n.capacity || {}, al = n.allocated || {};
    const labels = td('');
    for (const l of n.labels || []) labels.append(el('span', 'label', l));
    tr.append(td(n.name), st, td(n.runtime),
      usage(al.cpu_milli || 0, cap.cpu_milli || 0, `${cores(al.cpu_milli || 0)}/${cores(cap.cpu_milli || 0)}`),
      usage(al.memory || 0, cap.memory || 0, `${gib(al.memory || 0)}/${gib(cap.memory || 0)} GiB`),
      cap.gpu > 0 ? usage(al.gpu || 0, cap.gpu, `${num(al.gpu, 2)}/${num(cap.gpu, 2)}`) : td('-'),
      td(n.addr), labels);
    frag.append(tr);
  }
  tb.replaceChildren(frag);
}

// renderReservations draws the reservations in force on one time axis,
// from now to the last window's end (a day at least): a bar per window,
// maintenance windows in their own colour.
function renderReservations() {
  const box = document.getElementById('reservations');
  const now = Date.now() + S.skew;
  const rs = S.resv.slice().sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
  let until = now + 24 * 3600e3;
  for (const r of rs) until = Math.max(until, Date.parse(r.end));
  const span = until - now;
  const pos = t => Math.max(0, Math.min(100, 100 * (t - now) / span));
  const frag = document.createDocumentFragment();
  for (const r of rs) {
    const row = el('div', 'resv');
    row.id = 'resv-' + r.name;
    const flags = (r.flags || []).join(',');
    row.append(el('span', 'resv-name', r.name), el('span', 'state ' + r.state, r.state));
    const lane = el('span', 'lane');
    const win = el('span', 'window' + ((r.flags || []).includes('maint') ? ' maint' : ''));
    const s = pos(Date.parse(r.start)), e = pos(Date.parse(r.end));
    win.style.left = s + '%';
    win.style.width = Math.max(0.5, e - s) + '%';
    win.title = `${new Date(r.start).toLocaleString()} – ${new Date(r.end).toLocaleString()}`;
    lane.append(win);
    row.append(lane, el('span', 'muted', `${(r.nodes || []).length} node(s)${flags ? ' · ' + flags : ''}`));
    frag.append(row);
  }
  box.replaceChildren(frag);
  document.getElementById('reservations-empty').hidden = rs.length > 0;
  document.getElementById('resv-span').textContent = rs.length ? `now → ${new Date(until).toLocaleString()}` : '';
}

function renderPartitions() {
  if (!S.parts) return;
  document.getElementById('policy').textContent =
    (S.parts.policy ? 'policy ' + S.parts.policy : '') + (S.parts.source ? ' · ' + S.parts.source : ' · built in');
  const tb = document.querySelector('#partitions tbody');
  const frag = document.createDocumentFragment();
  const all = a => (a && a.length) ? a.join(',') : 'all';
  for (const p of S.parts.partitions || []) {
    const tr = el('tr');
    tr.id = 'partition-' + p.name;
    const cap = p.capacity || {};
    tr.append(td(p.name + (p.default ? '*' : '')), td((p.nodes || []).length, 'num'), td(cores(cap.cpu_milli || 0), 'num'),
      td(gib(cap.memory || 0), 'num'), td(cap.gpu > 0 ? num(cap.gpu, 2) : '-', 'num'),
      td(durNS(p.max_walltime)), td(durNS(p.default_walltime)), td(p.max_cluster_size > 0 ? p.max_cluster_size : '-', 'num'),
      td(p.priority_tier || 0, 'num'), td(p.pending, 'num'), td(p.running, 'num'), td(all(p.allowed_accounts)), td(all(p.allowed_modes)));
    frag.append(tr);
  }
  tb.replaceChildren(frag);
}

function renderFairShare() {
  if (!S.fs) return;
  const hl = S.fs.usage_half_life;
  document.getElementById('halflife').textContent = hl > 0 ? 'usage half-life ' + elapsed(hl / 1e6) : '';
  const tb = document.querySelector('#fairshare tbody');
  const frag = document.createDocumentFragment();
  const rows = S.fs.rows || [];
  for (const r of rows) {
    const tr = el('tr');
    const a = td(r.user ? '' : r.account);
    a.style.paddingLeft = (10 + 14 * (r.depth || 0)) + 'px';
    tr.append(a, td(r.user || ''), td(num(r.raw_shares, 3), 'num'), td(Number(r.norm_shares).toFixed(6), 'num'),
      td(Number(r.raw_usage).toFixed(0), 'num'), td(Number(r.effectv_usage).toFixed(6), 'num'),
      td(r.user ? Number(r.fair_share).toFixed(6) : '', 'num'));
    frag.append(tr);
  }
  tb.replaceChildren(frag);
  document.getElementById('fairshare-empty').hidden = rows.length > 0;
}

function kv(dl, k, v) {
  if (v === undefined || v === null || v === '') return;
  dl.append(el('dt', null, k));
  const dd = el('dd');
  if (v instanceof Node) dd.append(v); else dd.textContent = String(v);
  dl.append(dd);
}

function renderDetail() {
  const aside = document.getElementById('detail');
  const main = document.getElementById('main');
  aside.hidden = !S.selected;
  main.classList.toggle('with-detail', !!S.selected);
  if (!S.selected) return;
  const j = S.job;
  const body = document.getElementById('detail-body');
  const title = document.getElementById('detail-title');
  if (!j || j.id !== S.selected) { title.textContent = 'Job ' + S.selected; body.replaceChildren(el('p', 'empty', 'loading…')); return; }
  if (j.missing) { title.textContent = 'Job ' + j.id; body.replaceChildren(el('p', 'empty', 'No such job.')); return; }
  title.textContent = `Job ${jobRef(j)}: ${j.name}`;
  const s = j.spec || {};
  const dl = el('dl', 'kv');
  const st = el('span'); st.append(stateBadge(j.state));
  if (jobReason(j)) st.append(document.createTextNode(' ' + jobReason(j)));
  kv(dl, 'State', st);
  kv(dl, 'User', `${j.user} (uid ${j.uid}, gid ${j.gid})`);
  kv(dl, 'Account', account(j));
  kv(dl, 'Partition', j.partition);
  kv(dl, 'Size', `${jobSize(j)} (${(s.cluster && s.cluster.mode) || '-'})`);
  const res = s.resources || {};
  kv(dl, 'Resources', `${num(res.cpu, 3)} cpu, ${gib(res.memory || 0)} GiB` + (res.gpu > 0 ? `, ${num(res.gpu, 3)} gpu` : '') + ' per container');
  kv(dl, 'Image', s.image);
  if (s.command && s.command.length) kv(dl, 'Command', s.command.join(' '));
  kv(dl, 'Time limit', j.walltime > 0 ? elapsed(j.walltime / 1e6) : 'UNLIMITED');
  kv(dl, 'Submitted', ts(j.submitted));
  kv(dl, 'Started', started(j) ? ts(j.started) : '');
  kv(dl, 'Ended', j.ended ? ts(j.ended) : '');
  kv(dl, 'Expected start', j.estimated_start ? ts(j.estimated_start) : '');
  if (terminal(j.state)) kv(dl, 'Exit code', j.exit_code);
  if (j.requeues) kv(dl, 'Requeues', `${j.requeues} (${j.last_requeue || ''})`);
  if (j.state === 'PENDING' && j.queue_position > 0) kv(dl, 'Queue position', `${j.queue_position} of ${j.queue_length} in ${j.partition}`);
  if (j.network) kv(dl, 'Network', `${j.network.subnet} (vni ${j.network.vni})`);
  kv(dl, 'Session', j.session_id);
  const parts = [dl];
  // The buttons come first, above the rest.
  parts.unshift(actions(j));

  const f = j.priority_factors;
  if (j.state === 'PENDING' && f) {
    parts.push(el('h3', null, 'Priority ' + num(j.priority, 0)));
    const t = el('table'); t.id = 'priority';
    const hr = el('tr');
    for (const h of ['AGE', 'FAIRSHARE', 'JOBSIZE', 'PARTITION', 'NICE', 'TOTAL']) hr.append(el('th', 'num', h));
    const r = el('tr');
    for (const v of [f.age, f.fair_share, f.job_size, f.partition, f.nice, f.total]) r.append(td(num(v, 0), 'num'));
    t.append(hr, r);
    const w = el('div', 'scroll'); w.append(t);
    parts.push(w);
  }

  parts.push(el('h3', null, 'Containers'));
  const ct = el('table'); ct.id = 'containers';
  const hr = el('tr');
  for (const h of ['HOST', 'ROLE', 'NODE', 'NODE_ADDR', 'ADDR', 'STATE', 'EXIT']) hr.append(el('th', null, h));
  ct.append(hr);
  for (const c of j.containers || []) {
    const tr = el('tr');
    const ended = ['exited', 'failed', 'killed', 'oom'].includes(c.state);
    tr.append(td(c.host), td(c.role), td(c.node || '-'), td(c.node_addr || '-'), td(c.addr || '-'), td(c.state),
      td(ended ? c.exit_code : '', 'num'));
    ct.append(tr);
    if (c.message) {
      const m = el('tr'); const mc = td(c.host + ': ' + c.message, 'msg'); mc.colSpan = 7; m.append(mc); ct.append(m);
    }
  }
  const wrap = el('div', 'scroll'); wrap.append(ct);
  parts.push(wrap);
  body.replaceChildren(...parts);
}

// ---- selection (the URL's #job=ID, so a job's view can be linked)

function fromHash() {
  const m = /^#job=(\d+)$/.exec(location.hash);
  return m ? Number(m[1]) : 0;
}

async function select(id) {
  if (location.hash !== '#job=' + id) history.replaceState(null, '', '#job=' + id);
  await show(id);
}

async function show(id) {
  S.selected = id;
  S.job = null;
  renderQueue();
  renderDetail();
  try { await refreshJob(); } catch (e) { setLive(false, e.message); }
  renderDetail();
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('filter').addEventListener('input', renderQueue);
  document.getElementById('show-ended').addEventListener('change', renderQueue);
  document.getElementById('detail-close').addEventListener('click', e => {
    e.preventDefault();
    history.replaceState(null, '', location.pathname);
    show(0);
  });
  window.addEventListener('hashchange', () => show(fromHash()));
  document.getElementById('login-open').addEventListener('click', () => {
    const f = document.getElementById('login-form');
    f.hidden = !f.hidden;
    if (!f.hidden) document.getElementById('login-token').focus();
  });
  document.getElementById('login-form').addEventListener('submit', login);
  document.getElementById('logout').addEventListener('click', logout);
  document.getElementById('job-submit').addEventListener('click', submitJob);
  document.getElementById('job-file').addEventListener('change', readJobFile);
  document.getElementById('terminal-close').addEventListener('click', e => { e.preventDefault(); Term.close(); });
  document.getElementById('output-close').addEventListener('click', e => { e.preventDefault(); stopOutput(); });
  refreshSession();
  S.selected = fromHash();
  setInterval(tick, 1000);
  loop();
});
