// compact sessions: the fleet, one session turn by turn, and the spans.
// Sources: GET /api/sessions (the fleet with its counters, history included),
// GET /api/sessions/{id} (one row per preflight), GET
// /api/sessions/{id}/preflights/{span} (a compaction in full),
// GET /api/traces/{id} (spans), GET /events (SSE, live; the browser resumes
// with Last-Event-ID). Against a server without /api/sessions it falls back
// to /api/traces and counts what it sees.
// A read token given as /?token=T is passed on as ?access_token=T.
// URL state: ?trace=ID selects a session, ?view=session|spans the tab,
// ?turn=SPAN a preflight.
'use strict';

(function () {
  const MAX_TRACES = 300;           // traces kept in memory
  const MAX_SPANS_PER_TRACE = 4000; // spans kept per trace
  const FLEET_LIMIT = 200;          // sessions listed from history
  const HISTORY_DETAILS = 12;       // traces loaded with their spans up front (span view)
  const SESSION_REFRESH_MS = 120;   // a live event for the open session refetches it after this
  const FLEET_REFRESH_MS = 1000;    // live events refresh the fleet's counters at most this often

  const params = new URLSearchParams(window.location.search);
  const token = params.get('token') || params.get('access_token') || '';

  const state = {
    traces: new Map(),   // trace_id -> trace (see traceOf)
    selectedTrace: params.get('trace') || null,
    selectedSpan: params.get('span') || null, // "trace_id\u0000span_id" or span_id
    selectedTurn: params.get('turn') || null, // a compact.preflight span id
    view: params.get('view') === 'spans' ? 'spans' : 'session',
    viewChosen: params.has('view'),
    hiddenKinds: new Set(),
    kinds: new Map(),    // kind -> count
    text: '',
    errorsOnly: false,
    fleetQuery: '',
    fleetHas: new Set(),
    sessionsApi: null,   // null: not asked yet; true/false: the server has /api/sessions
    totals: null,        // /api/sessions totals (history), with the last_seq they include
    liveAfter: { events: 0, spans: 0, compact: 0, errors: 0 }, // live events after totals.last_seq
    counts: { events: 0, spans: 0, errors: 0, compact: 0 },    // fallback: what this page saw
    session: { id: null, data: null, loading: false, dirty: false, error: null },
    details: new Map(),  // preflight span id -> /api/sessions/{id}/preflights/{span}
  };

  const $ = (id) => document.getElementById(id);

  function withToken(path) {
    if (!token) return path;
    return path + (path.includes('?') ? '&' : '?') + 'access_token=' + encodeURIComponent(token);
  }

  function fetchJson(path) {
    const headers = token ? { Authorization: 'Bearer ' + token } : {};
    return fetch(withToken(path), { headers: headers }).then((r) => {
      if (!r.ok) {
        const e = new Error(path + ': HTTP ' + r.status);
        e.status = r.status;
        throw e;
      }
      return r.json();
    });
  }

  function syncUrl() {
    const p = new URLSearchParams(window.location.search);
    const set = (k, v) => { if (v) p.set(k, v); else p.delete(k); };
    set('trace', state.selectedTrace);
    set('turn', state.selectedTurn);
    set('view', state.viewChosen ? state.view : null);
    set('span', null);
    const q = p.toString();
    try { window.history.replaceState(null, '', window.location.pathname + (q ? '?' + q : '')); } catch (_) { /* file: or sandboxed */ }
  }

  // ---- model ------------------------------------------------------------

  function ms(ts) {
    if (typeof ts !== 'string') return NaN;
    const t = Date.parse(ts);
    return Number.isFinite(t) ? t : NaN;
  }

  function isCompact(span) {
    return typeof span.name === 'string' && span.name.startsWith('compact.');
  }

  function traceOf(id) {
    let t = state.traces.get(id);
    if (!t) {
      t = {
        id: id, info: {}, spans: new Map(), loaded: false, lastActivity: 0,
        entry: null,      // its /api/sessions (or /api/traces) entry
        listed: false,    // in the last fleet answer
        live: { compactions: 0, errors: 0, fallbacks: 0, insufficient: 0, breaker_open: 0, preflights: 0 },
      };
      state.traces.set(id, t);
      if (state.traces.size > MAX_TRACES) evictOldest();
    }
    return t;
  }

  function evictOldest() {
    let oldest = null;
    for (const t of state.traces.values()) {
      if (t.id === state.selectedTrace) continue;
      if (!oldest || t.lastActivity < oldest.lastActivity) oldest = t;
    }
    if (oldest) state.traces.delete(oldest.id);
  }

  function touch(t, when) {
    if (Number.isFinite(when) && when > t.lastActivity) t.lastActivity = when;
  }

  function addTrace(ev) {
    if (!ev || typeof ev.trace_id !== 'string') return null;
    const t = traceOf(ev.trace_id);
    for (const k of ['name', 'group_id', 'started_at', 'ended_at', 'metadata', 'times_derived']) {
      if (ev[k] === undefined || ev[k] === null) continue;
      if (k === 'metadata' && typeof ev[k] === 'object' && t.info.metadata) {
        t.info.metadata = Object.assign({}, t.info.metadata, ev[k]);
      } else {
        t.info[k] = ev[k];
      }
    }
    return t;
  }

  function addSpan(ev) {
    if (!ev || typeof ev.trace_id !== 'string' || typeof ev.span_id !== 'string') return null;
    const t = traceOf(ev.trace_id);
    const fresh = !t.spans.has(ev.span_id);
    if (fresh && t.spans.size >= MAX_SPANS_PER_TRACE) {
      const first = t.spans.keys().next().value;
      t.spans.delete(first);
    }
    const span = {
      trace_id: ev.trace_id,
      span_id: ev.span_id,
      parent_id: typeof ev.parent_id === 'string' && ev.parent_id ? ev.parent_id : null,
      kind: typeof ev.kind === 'string' && ev.kind ? ev.kind : 'span',
      name: typeof ev.name === 'string' && ev.name ? ev.name : (ev.kind || ev.span_id),
      started_at: ev.started_at,
      ended_at: ev.ended_at,
      status: ev.status === 'error' ? 'error' : 'ok',
      data: ev.data && typeof ev.data === 'object' ? ev.data : {},
      start: ms(ev.started_at),
      end: ms(ev.ended_at),
    };
    span.inProgress = !Number.isFinite(span.end);
    if (!Number.isFinite(span.start)) span.start = Number.isFinite(span.end) ? span.end : NaN;
    if (Number.isFinite(span.end) && span.end < span.start) span.end = span.start;
    t.spans.set(ev.span_id, span);
    if (fresh) {
      state.counts.spans += 1;
      if (span.status === 'error') state.counts.errors += 1;
      if (compacted(span)) state.counts.compact += 1;
      state.kinds.set(span.kind, (state.kinds.get(span.kind) || 0) + 1);
    }
    return t;
  }

  // A compact.preflight that compacted: triggered and did not fail.
  function compacted(span) {
    return span.name === 'compact.preflight' && span.data.triggered === true && !span.data.error;
  }

  // What a live event adds to its session's badges until the next refresh.
  function countLive(t, ev) {
    if (ev.type !== 'span') return;
    const d = ev.data && typeof ev.data === 'object' ? ev.data : {};
    if (ev.name === 'compact.preflight') {
      t.live.preflights += 1;
      if (d.triggered === true && !d.error) t.live.compactions += 1;
    }
    if (ev.status === 'error') t.live.errors += 1;
    if (ev.name === 'compact.error') {
      if (d.error_type === 'InsufficientBudget') t.live.insufficient += 1;
      if (d.error_type === 'CircuitOpen') t.live.breaker_open += 1;
      if (typeof d.fallback === 'string' && d.fallback && d.fallback !== 'none') t.live.fallbacks += 1;
    }
    if (ev.name === 'compact.token_estimate' && typeof d.usage_pct === 'number') t.liveUsage = d.usage_pct;
  }

  function ingest(ev, seq, live) {
    if (!ev || typeof ev !== 'object') return null;
    let t = null;
    if (ev.type === 'trace') t = addTrace(ev);
    else if (ev.type === 'span' || ev.span_id) t = addSpan(ev);
    if (t && live) {
      touch(t, Date.now());
      if (!state.totals || !(seq <= state.totals.last_seq)) {
        state.liveAfter.events += 1;
        if (ev.type === 'span') state.liveAfter.spans += 1;
        if (ev.status === 'error') state.liveAfter.errors += 1;
        if (ev.name === 'compact.preflight' && ev.data && ev.data.triggered === true && !ev.data.error) state.liveAfter.compact += 1;
        countLive(t, ev);
      }
    }
    return t;
  }

  // ---- live stream ------------------------------------------------------

  function connect() {
    if (typeof EventSource === 'undefined') {
      setConn('error', 'no EventSource');
      return;
    }
    const es = new EventSource(withToken('/events'));
    es.onopen = () => setConn('live', 'live');
    es.onerror = () => {
      // The browser reconnects by itself and sends Last-Event-ID.
      setConn(es.readyState === EventSource.CLOSED ? 'error' : 'wait',
        es.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting');
    };
    es.onmessage = (msg) => {
      let ev;
      try { ev = JSON.parse(msg.data); } catch (_) { return; }
      if (ev && ev.type === 'connected') { setConn('live', 'live'); return; }
      state.counts.events += 1;
      const seq = Number(msg.lastEventId);
      const t = ingest(ev, Number.isFinite(seq) && msg.lastEventId !== '' ? seq : NaN, true);
      if (t && t.id === state.selectedTrace) sessionDirty();
      fleetDirty();
      schedule();
    };
  }

  function setConn(cls, text) {
    const el = $('conn');
    el.className = 'pill pill-' + cls;
    el.textContent = text;
  }

  // ---- history ----------------------------------------------------------

  function listOf(body, key) {
    if (Array.isArray(body)) return body;
    if (body && Array.isArray(body[key])) return body[key];
    return [];
  }

  function loadTraceDetail(id) {
    const t = state.traces.get(id);
    if (t && (t.loaded || t.loading)) return Promise.resolve();
    if (t) t.loading = true;
    return fetchJson('/api/traces/' + encodeURIComponent(id)).then((body) => {
      if (body && body.trace && typeof body.trace === 'object') {
        addTrace(Object.assign({ trace_id: id }, body.trace));
      }
      for (const ev of listOf(body, 'spans')) addSpan(Object.assign({ trace_id: id }, ev));
      for (const ev of listOf(body, 'events')) ingest(ev, NaN, false);
      const tr = traceOf(id);
      tr.loaded = true;
      tr.loading = false;
      schedule();
    }).catch((e) => {
      traceOf(id).loading = false;
      console.warn('[compact] trace history', e);
    });
  }

  function fleetPath() {
    let path = '/api/sessions?limit=' + FLEET_LIMIT;
    if (state.fleetQuery) path += '&q=' + encodeURIComponent(state.fleetQuery);
    if (state.fleetHas.size) path += '&has=' + Array.from(state.fleetHas).join(',');
    return path;
  }

  function applyEntry(tr) {
    if (!tr || typeof tr.trace_id !== 'string') return null;
    const t = addTrace(tr);
    t.entry = tr;
    t.listed = true;
    const last = ms(tr.last_activity_at);
    // Without a server clock, only times the trace gives: never "now", so a
    // trace without timestamps is not sorted above everything.
    touch(t, Number.isFinite(last) ? last : ms(tr.ended_at || tr.started_at));
    return t;
  }

  let fleetLoading = false;
  let fleetAgain = false;
  function loadFleet() {
    if (fleetLoading) { fleetAgain = true; return Promise.resolve(); }
    fleetLoading = true;
    const done = () => {
      fleetLoading = false;
      if (fleetAgain) { fleetAgain = false; loadFleet(); }
    };
    if (state.sessionsApi === false) return loadTracesFallback().then(done, done);
    return fetchJson(fleetPath()).then((body) => {
      state.sessionsApi = true;
      for (const t of state.traces.values()) t.listed = false;
      for (const tr of listOf(body, 'sessions')) {
        const t = applyEntry(tr);
        if (t) t.live = { compactions: 0, errors: 0, fallbacks: 0, insufficient: 0, breaker_open: 0, preflights: 0 };
      }
      if (body && body.totals) {
        state.totals = body.totals;
        state.liveAfter = { events: 0, spans: 0, compact: 0, errors: 0 };
      }
      schedule();
    }).catch((e) => {
      if (e && e.status === 404 && state.sessionsApi === null) {
        state.sessionsApi = false;
        return loadTracesFallback();
      }
      console.warn('[compact] sessions', e);
      return null;
    }).then(done, done);
  }

  // A server without /api/sessions: the trace list, no history counts.
  function loadTracesFallback() {
    return fetchJson('/api/traces?limit=100').then((body) => {
      for (const tr of listOf(body, 'traces')) {
        const t = applyEntry(tr);
        if (t && typeof tr.event_count === 'number') t.eventCount = tr.event_count;
      }
      schedule();
    }).catch((e) => console.warn('[compact] history', e));
  }

  let fleetTimer = null;
  function fleetDirty() {
    if (fleetTimer || state.sessionsApi !== true) return;
    fleetTimer = setTimeout(() => { fleetTimer = null; loadFleet(); }, FLEET_REFRESH_MS);
  }

  function loadSession() {
    const id = state.selectedTrace;
    if (!id || state.sessionsApi !== true) return;
    const s = state.session;
    if (s.id !== id) {
      state.session = { id: id, data: null, loading: false, dirty: false, error: null };
    }
    if (state.session.loading) { state.session.dirty = true; return; }
    state.session.loading = true;
    state.session.dirty = false;
    fetchJson('/api/sessions/' + encodeURIComponent(id)).then((data) => {
      if (state.session.id !== id) return;
      state.session.data = data;
      state.session.error = null;
      // A preflight still in progress may have changed: fetch it again.
      for (const [span, entry] of state.details) {
        if (entry.data && entry.data.row && entry.data.row.in_progress) state.details.delete(span);
      }
      if (data && !state.viewChosen && Array.isArray(data.preflights) && data.preflights.length === 0) {
        // Not a compact session: its spans are what there is to see.
        state.view = 'spans';
        loadTraceDetail(id);
      }
      render();
    }).catch((e) => {
      if (state.session.id === id) state.session.error = e.status === 404 ? 'not retained on this server' : String(e.message || e);
      render();
    }).then(() => {
      if (state.session.id !== id) return;
      state.session.loading = false;
      if (state.session.dirty) loadSession();
    });
  }

  let sessionTimer = null;
  function sessionDirty() {
    if (sessionTimer) return;
    sessionTimer = setTimeout(() => { sessionTimer = null; if (state.view === 'session') loadSession(); }, SESSION_REFRESH_MS);
  }

  function loadDetail(spanId) {
    const id = state.selectedTrace;
    const cached = state.details.get(spanId);
    if (!id || (cached && (cached.data || cached.loading))) return;
    const entry = { loading: true, data: null, error: null };
    state.details.set(spanId, entry);
    fetchJson('/api/sessions/' + encodeURIComponent(id) + '/preflights/' + encodeURIComponent(spanId)).then((d) => {
      entry.data = d;
    }).catch((e) => {
      entry.error = String(e.message || e);
    }).then(() => {
      entry.loading = false;
      render();
    });
  }

  // ---- formatting -------------------------------------------------------

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; render(); }, 60);
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function fmtDuration(d) {
    if (!Number.isFinite(d) || d < 0) return '';
    if (d < 1) return '<1 ms';
    if (d < 1000) return (d < 10 ? d.toFixed(1) : Math.round(d)) + ' ms';
    if (d < 60000) return (d / 1000).toFixed(d < 10000 ? 2 : 1) + ' s';
    const m = Math.floor(d / 60000);
    return m + ' m ' + Math.round((d % 60000) / 1000) + ' s';
  }

  function fmtTime(t) {
    if (!Number.isFinite(t)) return '';
    return new Date(t).toISOString().slice(11, 23);
  }

  function fmtDate(t) {
    if (!Number.isFinite(t) || t <= 0) return '';
    const iso = new Date(t).toISOString();
    return iso.slice(0, 10) + ' ' + iso.slice(11, 19) + 'Z';
  }

  function fmtAgo(t) {
    if (!Number.isFinite(t) || t <= 0) return '';
    const s = Math.round((Date.now() - t) / 1000);
    if (s < 5) return 'now';
    if (s < 90) return s + ' s ago';
    if (s < 5400) return Math.round(s / 60) + ' min ago';
    if (s < 86400 * 2) return Math.round(s / 3600) + ' h ago';
    return fmtDate(t);
  }

  function fmtTokens(n) {
    if (typeof n !== 'number' || !Number.isFinite(n)) return '–';
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 1 : 2) + 'M';
    if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e5 ? 0 : 1) + 'k';
    return String(Math.round(n));
  }

  function fmtInt(n) {
    return typeof n === 'number' && Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
  }

  function fmtPct(p) {
    return typeof p === 'number' && Number.isFinite(p) ? (p * 100).toFixed(1) + '%' : '–';
  }

  function kindClass(kind) {
    return 'k-' + String(kind).toLowerCase().replace(/[^a-z0-9]+/g, '-');
  }

  function nameClass(name) {
    return 'n-' + String(name).toLowerCase().replace(/[^a-z0-9]+/g, '-');
  }

  const TIER_LABELS = {
    tool_result_budget: 'cap',
    clear_tool_io: 'clear',
    summarize: 'sum',
    reduce_keep: 'reduce',
    trim: 'trim',
  };

  // ---- fleet --------------------------------------------------------------

  function countsOf(t) {
    const c = (t.entry && t.entry.counts) || {};
    const out = {};
    for (const k of ['preflights', 'compactions', 'errors', 'insufficient', 'fallbacks', 'breaker_open']) {
      out[k] = (c[k] || 0) + (t.live[k] || 0);
    }
    if (!t.entry || !t.entry.counts) {
      // No server counters: what the loaded spans say.
      let errors = 0;
      let comp = 0;
      for (const s of t.spans.values()) {
        if (s.status === 'error') errors += 1;
        if (compacted(s)) comp += 1;
      }
      out.errors = Math.max(out.errors, errors);
      out.compactions = Math.max(out.compactions, comp);
    }
    out.events = t.entry && typeof t.entry.event_count === 'number' ? t.entry.event_count : (t.eventCount || t.spans.size);
    return out;
  }

  function usageOf(t) {
    if (typeof t.liveUsage === 'number') return t.liveUsage;
    return t.entry && typeof t.entry.usage_pct === 'number' ? t.entry.usage_pct : null;
  }

  const HAS = [
    ['compactions', 'compactions'],
    ['errors', 'errors'],
    ['insufficient', 'insufficient budget'],
    ['fallbacks', 'fallbacks'],
    ['breaker_open', 'breaker open'],
  ];

  function fleetVisible(t) {
    if (state.sessionsApi === true && !state.fleetQuery && !state.fleetHas.size) return true;
    if (state.fleetQuery && !t.id.toLowerCase().includes(state.fleetQuery.toLowerCase())) return false;
    if (!state.fleetHas.size) return true;
    if (t.listed) return true;
    const c = countsOf(t);
    for (const k of state.fleetHas) if (c[k] > 0) return true;
    return false;
  }

  function tracesSorted() {
    return Array.from(state.traces.values())
      .filter(fleetVisible)
      .sort((a, b) => (b.lastActivity - a.lastActivity) || (a.id < b.id ? -1 : 1));
  }

  function isEnded(t) {
    return Boolean(t.info.ended_at) && !t.info.times_derived;
  }

  function badges(box, c) {
    if (c.compactions) box.appendChild(el('span', 'badge badge-compact', c.compactions + ' compact'));
    if (c.errors) box.appendChild(el('span', 'badge badge-err', c.errors + ' err'));
    if (c.insufficient) box.appendChild(el('span', 'badge badge-err', c.insufficient + ' insufficient'));
    if (c.fallbacks) box.appendChild(el('span', 'badge badge-warn', c.fallbacks + ' fallback'));
    if (c.breaker_open) box.appendChild(el('span', 'badge badge-err', 'breaker open'));
  }

  function usageBar(u, cls) {
    const bar = el('div', 'usage-bar ' + (cls || ''));
    const fill = el('div', 'usage-fill');
    const v = typeof u === 'number' && Number.isFinite(u) ? u : 0;
    fill.style.width = Math.min(100, Math.max(0, v * 100)).toFixed(1) + '%';
    if (v >= 0.85) fill.classList.add('hot');
    bar.appendChild(fill);
    bar.title = typeof u === 'number' ? 'context ' + fmtPct(u) + ' full' : 'no estimate';
    return bar;
  }

  function renderHasChips() {
    const box = $('f-has');
    box.replaceChildren();
    for (const [key, label] of HAS) {
      const chip = el('button', 'chip has-chip' + (state.fleetHas.has(key) ? ' on' : ''), label);
      chip.type = 'button';
      chip.dataset.has = key;
      chip.addEventListener('click', () => {
        if (state.fleetHas.has(key)) state.fleetHas.delete(key); else state.fleetHas.add(key);
        loadFleet();
        render();
      });
      box.appendChild(chip);
    }
  }

  function selectTrace(id) {
    state.selectedTrace = id;
    state.selectedTurn = null;
    state.selectedSpan = null;
    if (id && state.view === 'session' && state.sessionsApi === true) loadSession();
    if (id && (state.view === 'spans' || state.sessionsApi === false)) loadTraceDetail(id);
    syncUrl();
    render();
  }

  function renderTraceList(sorted) {
    const ul = $('trace-list');
    ul.replaceChildren();
    const all = el('li', 'trace-item trace-all' + (state.selectedTrace ? '' : ' selected'));
    all.appendChild(el('div', 'trace-name', 'All sessions'));
    all.appendChild(el('div', 'trace-meta', sorted.length + ' listed'));
    all.addEventListener('click', () => selectTrace(null));
    ul.appendChild(all);
    for (const t of sorted) {
      const c = countsOf(t);
      const li = el('li', 'trace-item' + (state.selectedTrace === t.id ? ' selected' : ''));
      li.dataset.traceId = t.id;
      const head = el('div', 'trace-head');
      const recent = Date.now() - t.lastActivity < 60000;
      head.appendChild(el('span', 'state-dot ' + (isEnded(t) ? 'ended' : recent ? 'live' : 'idle')));
      head.appendChild(el('span', 'trace-name', t.info.name || (t.info.metadata && t.info.metadata.agent_name) || 'trace'));
      li.appendChild(head);
      li.appendChild(el('div', 'trace-id mono', t.id));
      const b = el('div', 'trace-badges');
      badges(b, c);
      if (b.childNodes.length) li.appendChild(b);
      const meta = el('div', 'trace-meta');
      const u = usageOf(t);
      if (u !== null) meta.appendChild(usageBar(u, 'mini'));
      const bits = [];
      if (c.preflights) bits.push(c.preflights + ' turns');
      else bits.push(c.events + ' events');
      bits.push(fmtAgo(t.lastActivity) || 'no time');
      meta.appendChild(el('span', null, bits.join(' · ')));
      li.appendChild(meta);
      li.addEventListener('click', () => selectTrace(t.id));
      ul.appendChild(li);
    }
  }

  function renderCounters() {
    const tot = state.totals;
    if (tot) {
      $('c-events').textContent = fmtInt((tot.events || 0) + state.liveAfter.events);
      $('c-spans').textContent = fmtInt((tot.spans || 0) + state.liveAfter.spans);
      $('c-compact').textContent = fmtInt((tot.compactions || 0) + state.liveAfter.compact);
      $('c-errors').textContent = fmtInt((tot.errors || 0) + state.liveAfter.errors);
      $('c-traces').textContent = fmtInt(Math.max(tot.traces || 0, state.traces.size));
    } else {
      $('c-events').textContent = state.counts.events;
      $('c-spans').textContent = state.counts.spans;
      $('c-compact').textContent = state.counts.compact;
      $('c-errors').textContent = state.counts.errors;
      $('c-traces').textContent = state.traces.size;
    }
  }

  function renderFleetTable(box, sorted) {
    box.appendChild(el('div', 'view-title', 'Sessions'));
    box.appendChild(el('div', 'muted view-sub', 'Every session the server retains, most recent activity first. Select one to see it turn by turn.'));
    const table = el('table', 'grid fleet-table');
    const head = el('tr');
    for (const h of ['session', 'agent', 'last activity', 'turns', 'compactions', 'context', 'errors', 'insufficient', 'fallbacks', 'breaker', 'state']) head.appendChild(el('th', null, h));
    table.appendChild(el('thead')).appendChild(head);
    const body = el('tbody');
    for (const t of sorted) {
      const c = countsOf(t);
      const tr = el('tr', 'fleet-row' + (c.errors ? ' has-err' : ''));
      tr.dataset.traceId = t.id;
      tr.appendChild(el('td', 'mono', t.id));
      tr.appendChild(el('td', null, t.info.name || (t.info.metadata && t.info.metadata.agent_name) || ''));
      tr.appendChild(el('td', 'muted', fmtAgo(t.lastActivity)));
      tr.appendChild(el('td', 'num', c.preflights || ''));
      tr.appendChild(el('td', 'num compact-num', c.compactions || ''));
      const u = el('td');
      const ub = usageOf(t);
      if (ub !== null) { u.appendChild(usageBar(ub)); u.appendChild(el('span', 'muted small', fmtPct(ub))); }
      tr.appendChild(u);
      tr.appendChild(el('td', 'num err-num', c.errors || ''));
      tr.appendChild(el('td', 'num err-num', c.insufficient || ''));
      tr.appendChild(el('td', 'num warn-num', c.fallbacks || ''));
      tr.appendChild(el('td', 'num err-num', c.breaker_open ? 'open ×' + c.breaker_open : ''));
      tr.appendChild(el('td', 'muted', isEnded(t) ? 'ended' : (Date.now() - t.lastActivity < 60000 ? 'live' : 'idle')));
      tr.addEventListener('click', () => selectTrace(t.id));
      body.appendChild(tr);
    }
    table.appendChild(body);
    box.appendChild(table);
  }

  // ---- session view ------------------------------------------------------

  function sessionHeader(box, t, d) {
    const head = el('div', 'session-head');
    const title = el('div', 'session-title');
    title.appendChild(el('span', 'trace-title', (t && t.info.name) || d.name || 'session'));
    title.appendChild(el('span', 'mono trace-header-id', d.trace_id));
    const ended = d.ended_at && !d.times_derived;
    title.appendChild(el('span', 'pill ' + (ended ? 'pill-ended' : 'pill-progress'), ended ? 'ended' : 'in progress'));
    head.appendChild(title);
    const rows = d.preflights || [];
    const comp = rows.filter((r) => r.triggered && !r.error).length;
    const removed = rows.reduce((a, r) => a + Math.max(0, (r.tokens_before || 0) - (r.tokens_after || r.tokens_before || 0)), 0);
    const latest = rows.length ? rows[rows.length - 1] : null;
    const stats = el('div', 'session-stats');
    const stat = (label, value, cls) => {
      const s = el('div', 'stat ' + (cls || ''));
      s.appendChild(el('b', null, value));
      s.appendChild(el('span', null, label));
      stats.appendChild(s);
    };
    stat('turns', rows.length);
    stat('compactions', comp, 'stat-compact');
    stat('window', fmtTokens(d.window));
    stat('trigger / target', fmtPct(d.trigger_pct) + ' / ' + fmtPct(d.target_pct));
    stat('tokens taken out by compactions', fmtTokens(removed));
    if (latest) stat('context now', fmtPct(typeof latest.usage_after === 'number' ? latest.usage_after : latest.usage_before));
    const c = d.counts || {};
    const cache = cacheOf(c);
    if (cache) {
      stat('prompt cache hit' + (cache.reported ? '' : ' (predicted)'), fmtPct(cache.hit), 'stat-cache');
      if (cache.cost !== null) stat('cost' + (cache.reported ? ' (reported)' : ' (predicted input)'), fmtUsd(cache.cost), 'stat-cache');
      if (c.cache_breaks) stat('prefix breaks', c.cache_breaks, 'stat-warn');
    }
    if (c.errors) stat('errors', c.errors, 'stat-err');
    if (c.insufficient) stat('insufficient budget', c.insufficient, 'stat-err');
    if (c.fallbacks) stat('fallbacks', c.fallbacks, 'stat-warn');
    if (c.breaker_open) stat('breaker open', c.breaker_open, 'stat-err');
    const started = ms(d.started_at);
    const endedAt = ms(d.ended_at);
    stat(ended ? 'ran for' : 'running for', fmtDuration((ended ? endedAt : Date.now()) - started) || '–');
    head.appendChild(stats);
    box.appendChild(head);
  }

  // The session's prompt cache from its counters: what the provider reported
  // when callers passed their usage figures, else what compact predicted.
  function cacheOf(c) {
    if (c.input_tokens_reported > 0) {
      return { reported: true, hit: c.cache_read_reported / c.input_tokens_reported, cost: c.cost_reported_micro_usd > 0 ? c.cost_reported_micro_usd / 1e6 : null };
    }
    if (c.prompt_tokens_predicted > 0) {
      return { reported: false, hit: c.cache_read_predicted / c.prompt_tokens_predicted, cost: c.cost_predicted_micro_usd > 0 ? c.cost_predicted_micro_usd / 1e6 : null };
    }
    return null;
  }

  function fmtUsd(v) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return '–';
    return '$' + (v >= 1 ? v.toFixed(2) : v >= 0.01 ? v.toFixed(3) : v.toFixed(5));
  }

  // One call's cache cell: the share of its request the cache serves (as
  // reported for the previous call, or predicted for this one) and, when
  // its rewrite broke the prefix, the tokens that will be paid again.
  function cacheCell(r) {
    const td = el('td', 'num cache-cell');
    const k = r.cache;
    if (!k) return td;
    if (typeof k.read_predicted === 'number' && typeof r.tokens_after === 'number' && r.tokens_after > 0) {
      td.appendChild(el('span', null, fmtPct(k.read_predicted / r.tokens_after)));
    }
    if (k.broken_tokens > 0) {
      td.appendChild(el('span', 'badge badge-warn cache-break', 'break ' + fmtTokens(k.broken_tokens)));
    }
    const lines = [];
    if (typeof k.read_predicted === 'number') lines.push('predicted cache read: ' + fmtInt(k.read_predicted) + ' of ' + fmtInt(r.tokens_after) + ' tokens');
    if (typeof k.shared_tokens === 'number') lines.push('shared with the previous request: ' + fmtInt(k.shared_tokens));
    if (k.broken_tokens > 0) lines.push('previous request tokens no longer a prefix (paid again): ' + fmtInt(k.broken_tokens));
    if (typeof k.cost_predicted_usd === 'number') lines.push('predicted input cost: ' + fmtUsd(k.cost_predicted_usd));
    if (typeof k.input_reported === 'number') lines.push('reported for the previous call: ' + fmtInt(k.read_reported || 0) + ' of ' + fmtInt(k.input_reported) + ' input tokens from the cache, ' + fmtInt(k.write_reported || 0) + ' written' + (typeof k.cost_reported_usd === 'number' ? ', ' + fmtUsd(k.cost_reported_usd) : ''));
    td.title = lines.join('\n');
    return td;
  }

  // Context usage per turn against the window, the trigger and the target.
  function usageChart(box, d) {
    const rows = (d.preflights || []).filter((r) => typeof r.tokens_before === 'number');
    const wrap = el('div', 'chart-wrap');
    const legend = el('div', 'chart-legend');
    const key = (cls, label) => { const k = el('span', 'key ' + cls); k.appendChild(el('i')); k.appendChild(document.createTextNode(label)); legend.appendChild(k); };
    key('key-before', 'before preflight');
    key('key-after', 'sent to the model');
    key('key-window', 'window');
    key('key-trigger', 'trigger');
    key('key-target', 'target');
    wrap.appendChild(legend);
    const W = Math.max(480, Math.round(($('session-view').clientWidth || 900) - 24));
    const H = 230;
    const pad = { l: 48, r: 104, t: 12, b: 26 };
    const window_ = typeof d.window === 'number' && d.window > 0 ? d.window : Math.max(1, ...rows.map((r) => r.tokens_before));
    const top = Math.max(window_, ...rows.map((r) => r.tokens_before || 0)) * 1.06;
    const n = rows.length;
    const x = (i) => pad.l + (n <= 1 ? (W - pad.l - pad.r) / 2 : (i / (n - 1)) * (W - pad.l - pad.r));
    const y = (v) => pad.t + (1 - v / top) * (H - pad.t - pad.b);
    const chart = svg('svg', { id: 'usage-chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'context usage per turn' });
    // Grid: quarters of the window.
    for (const q of [0.25, 0.5, 0.75]) {
      chart.appendChild(svg('line', { class: 'grid-line', x1: pad.l, x2: W - pad.r, y1: y(window_ * q), y2: y(window_ * q) }));
      chart.appendChild(svg('text', { class: 'axis-label', x: pad.l - 6, y: y(window_ * q) + 4, 'text-anchor': 'end' }, fmtTokens(window_ * q)));
    }
    const hline = (v, cls, label) => {
      chart.appendChild(svg('line', { class: cls, x1: pad.l, x2: W - pad.r, y1: y(v), y2: y(v) }));
      chart.appendChild(svg('text', { class: 'line-label ' + cls + '-label', x: W - pad.r + 6, y: y(v) + 4 }, label));
    };
    hline(window_, 'window-line', 'window ' + fmtTokens(window_).replace('.0k', 'k'));
    chart.appendChild(svg('text', { class: 'axis-label', x: pad.l - 6, y: y(window_) + 4, 'text-anchor': 'end' }, fmtTokens(window_)));
    if (typeof d.trigger_pct === 'number') hline(window_ * d.trigger_pct, 'trigger-line', 'trigger ' + Math.round(d.trigger_pct * 100) + '%');
    if (typeof d.target_pct === 'number') hline(window_ * d.target_pct, 'target-line', 'target ' + Math.round(d.target_pct * 100) + '%');
    chart.appendChild(svg('line', { class: 'axis-line', x1: pad.l, x2: W - pad.r, y1: y(0), y2: y(0) }));
    chart.appendChild(svg('text', { class: 'axis-label', x: pad.l - 6, y: y(0) + 4, 'text-anchor': 'end' }, '0'));
    // Turn ticks: about ten.
    const every = Math.max(1, Math.ceil(n / 10));
    rows.forEach((r, i) => {
      if (i % every === 0 || i === n - 1) {
        chart.appendChild(svg('text', { class: 'axis-label', x: x(i), y: H - 8, 'text-anchor': 'middle' }, r.turn));
      }
    });
    // What was sent: a step down at each compaction.
    const after = rows.map((r, i) => x(i) + ',' + y(typeof r.tokens_after === 'number' ? r.tokens_after : r.tokens_before)).join(' ');
    const before = rows.map((r, i) => x(i) + ',' + y(r.tokens_before)).join(' ');
    chart.appendChild(svg('polyline', { class: 'before-line', points: before }));
    chart.appendChild(svg('polyline', { class: 'after-line', points: after }));
    rows.forEach((r, i) => {
      const comp = r.triggered && typeof r.tokens_after === 'number' && r.tokens_after < r.tokens_before;
      const g = svg('g', { class: 'turn' + (comp ? ' turn-compact' : '') + (r.span_id === state.selectedTurn ? ' turn-selected' : '') + (r.error ? ' turn-error' : '') });
      if (comp) {
        g.appendChild(svg('line', { class: 'drop', x1: x(i), x2: x(i), y1: y(r.tokens_before), y2: y(r.tokens_after) }));
        g.appendChild(svg('circle', { class: 'pt-after', cx: x(i), cy: y(r.tokens_after), r: 3 }));
      }
      const pt = svg('circle', { class: 'pt' + (comp ? ' pt-compact' : '') + (r.error ? ' pt-error' : '') + (r.in_progress ? ' pt-progress' : ''), cx: x(i), cy: y(r.tokens_before), r: comp ? 5 : 3.5, 'data-turn': r.turn, 'data-span-id': r.span_id });
      g.appendChild(pt);
      g.appendChild(svg('title', {}, 'turn ' + r.turn + ': ' + fmtInt(r.tokens_before) + ' → ' + fmtInt(r.tokens_after) + ' tokens (' + fmtPct(r.usage_before) + ' → ' + fmtPct(r.usage_after) + ')' + (r.reason ? '\n' + r.reason : '')));
      g.addEventListener('click', () => selectTurn(r.span_id));
      chart.appendChild(g);
    });
    wrap.appendChild(chart);
    box.appendChild(wrap);
  }

  function selectTurn(spanId) {
    state.selectedTurn = state.selectedTurn === spanId ? null : spanId;
    state.diffExpanded = false;
    if (state.selectedTurn) loadDetail(state.selectedTurn);
    syncUrl();
    render();
    const row = document.querySelector('tr.pf-row[data-span-id="' + CSS.escape(spanId) + '"]');
    if (row && row.scrollIntoView) row.scrollIntoView({ block: 'nearest' });
  }

  // The trigger rules (docs/events.md, compact.trigger_decision) in a word or two.
  const REASONS = {
    'usage_pct >= trigger_pct': 'over trigger',
    'usage_pct < trigger_pct': 'below trigger',
    't_est > max_tokens - hard_cap_buffer': 'near hard cap',
    't_est > token_budget': 'over budget',
    't_est > token_soft_budget': 'over soft budget',
    'remaining_pct < token_remaining_pct': 'little room left',
    'user_turns > compact_trigger_turns': 'turn limit',
    'forced: manual': 'manual',
    'forced: context_overflow': 'overflow',
  };

  function shortReason(reason) {
    if (typeof reason !== 'string' || !reason) return '';
    return reason.split('; ').map((r) => REASONS[r] || r).join(' + ');
  }

  function tierChips(cell, tiers) {
    for (const tier of tiers || []) {
      const chip = el('span', 'tier tier-' + tier, TIER_LABELS[tier] || tier);
      chip.title = tier;
      cell.appendChild(chip);
    }
  }

  function factsText(s) {
    if (!s) return '';
    const parts = [];
    if (s.facts_kept !== null && s.facts_kept !== undefined) parts.push(s.facts_kept + ' kept');
    if (s.facts_dropped !== null && s.facts_dropped !== undefined) parts.push(s.facts_dropped + ' dropped');
    return parts.join(' / ');
  }

  function preflightTable(box, d) {
    const rows = d.preflights || [];
    const t0 = rows.length ? ms(rows[0].started_at) : NaN;
    const table = el('table', 'grid pf-table');
    const head = el('tr');
    const heads = [
      ['turn', 'the preflight before model call N'],
      ['at', 'since the first preflight'],
      ['tokens', 'before → after compaction (exact count)'],
      ['of window', 'share of the context window, before → after'],
      ['decision', 'why it compacted, or did not'],
      ['tiers', 'cap tool outputs, clear old tool I/O, reduce kept turns, summarize'],
      ['summary · facts', 'summary version written · facts kept / dropped'],
      ['files', 'archive objects written (before anything left the context)'],
      ['cache', "share of the request the provider's prompt cache can serve; a break: tokens of the previous request this call rewrote"],
      ['took', 'preflight duration'],
    ];
    for (const [h, title] of heads) {
      const th = el('th', null, h);
      th.title = title;
      head.appendChild(th);
    }
    table.appendChild(el('thead')).appendChild(head);
    const body = el('tbody');
    for (const r of rows) {
      const comp = r.triggered;
      const tr = el('tr', 'pf-row' + (comp ? ' compaction' : '') + (r.status === 'error' || r.error ? ' error' : '') + (r.in_progress ? ' in-progress' : '') + (r.span_id === state.selectedTurn ? ' selected' : ''));
      tr.dataset.spanId = r.span_id;
      tr.dataset.turn = r.turn;
      tr.appendChild(el('td', 'num', r.turn));
      const since = ms(r.started_at) - t0;
      const at = el('td', 'muted num', Number.isFinite(since) ? (since < 1 ? '0' : '+' + fmtDuration(since)) : '');
      at.title = r.started_at || '';
      tr.appendChild(at);
      const tok = el('td', 'num tokens');
      tok.appendChild(el('span', null, fmtInt(r.tokens_before)));
      if (comp && typeof r.tokens_after === 'number' && r.tokens_after !== r.tokens_before) {
        tok.appendChild(el('span', 'arrow', ' → '));
        tok.appendChild(el('b', 'after', fmtInt(r.tokens_after)));
      }
      tr.appendChild(tok);
      const pct = el('td', 'pct');
      pct.appendChild(usageBar(comp ? r.usage_after : r.usage_before));
      pct.appendChild(el('span', 'small', comp ? fmtPct(r.usage_before) + ' → ' + fmtPct(r.usage_after) : fmtPct(r.usage_before)));
      tr.appendChild(pct);
      const why = el('td', 'reason');
      if (r.error) why.appendChild(el('span', 'badge badge-err', r.error));
      else why.appendChild(el('span', comp ? null : 'muted', shortReason(r.reason) || (comp ? 'triggered' : '–')));
      why.title = r.reason || '';
      for (const e of r.errors || []) {
        const cls = e.error_type === 'CircuitOpen' || e.error_type === 'InsufficientBudget' ? 'badge-err' : 'badge-warn';
        why.appendChild(el('span', 'badge ' + cls, (e.error_type || 'error') + (e.fallback && e.fallback !== 'none' ? ' → ' + e.fallback : '')));
      }
      tr.appendChild(why);
      const tiers = el('td', 'tiers');
      tierChips(tiers, r.tiers);
      tr.appendChild(tiers);
      const sum = el('td', 'summary-cell');
      if (r.summary) {
        sum.appendChild(el('b', 'version', 'v' + (r.summary.version !== null ? r.summary.version : '?')));
        const s = r.summary;
        if (s.facts_kept !== null && s.facts_kept !== undefined) {
          const facts = el('span', 'muted small facts', ' · ' + s.facts_kept + ' / ' + (s.facts_dropped !== null && s.facts_dropped !== undefined ? s.facts_dropped : '?'));
          facts.title = factsText(s) + ' facts';
          sum.appendChild(facts);
        }
      }
      tr.appendChild(sum);
      const arch = el('td', 'num' + (r.archival && r.archival.spooled.length ? ' err-num' : ''), r.archival ? r.archival.keys.length + (r.archival.spooled.length ? ' + spool' : '') : '');
      if (r.archival) arch.title = r.archival.keys.concat(r.archival.spooled).join('\n');
      tr.appendChild(arch);
      tr.appendChild(cacheCell(r));
      const dur = el('td', 'num');
      if (r.in_progress) dur.appendChild(el('span', 'in-progress-label', 'in progress'));
      else dur.textContent = fmtDuration(r.duration_ms);
      tr.appendChild(dur);
      tr.addEventListener('click', () => selectTurn(r.span_id));
      body.appendChild(tr);
    }
    table.appendChild(body);
    const scroll = el('div', 'table-scroll');
    scroll.appendChild(table);
    box.appendChild(scroll);
  }

  function renderSession(sorted) {
    const box = $('session-view');
    box.replaceChildren();
    if (!state.selectedTrace) {
      if (sorted.length) renderFleetTable(box, sorted);
      return;
    }
    const t = state.traces.get(state.selectedTrace);
    const s = state.session;
    if (state.sessionsApi === false) {
      box.appendChild(el('div', 'empty', 'This server has no session API (/api/sessions): see the Spans tab.'));
      return;
    }
    if (s.id !== state.selectedTrace || (!s.data && !s.error)) {
      box.appendChild(el('div', 'empty', 'loading ' + state.selectedTrace + '…'));
      if (s.id !== state.selectedTrace && state.sessionsApi === true) loadSession();
      return;
    }
    if (!s.data) {
      box.appendChild(el('div', 'empty', state.selectedTrace + ': ' + s.error));
      return;
    }
    const d = s.data;
    sessionHeader(box, t, d);
    if (!(d.preflights || []).length) {
      box.appendChild(el('div', 'empty', 'No compact.preflight spans in this trace: its spans are in the Spans tab.'));
      return;
    }
    usageChart(box, d);
    preflightTable(box, d);
  }

  // ---- inspector: one preflight -------------------------------------------

  function kv(dl, k, v, mono) {
    if (v === undefined || v === null || v === '') return;
    dl.appendChild(el('dt', null, k));
    dl.appendChild(el('dd', mono ? 'mono' : null, v));
  }

  // Line diff (longest common subsequence), laid out side by side: runs of
  // removed and added lines share rows.
  function diffRows(a, b) {
    const A = a.split('\n');
    const B = b.split('\n');
    const n = A.length;
    const m = B.length;
    if (n * m > 4000000) return null;
    const w = m + 1;
    const dp = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i -= 1) {
      for (let j = m - 1; j >= 0; j -= 1) {
        dp[i * w + j] = A[i] === B[j] ? dp[(i + 1) * w + j + 1] + 1 : Math.max(dp[(i + 1) * w + j], dp[i * w + j + 1]);
      }
    }
    const ops = [];
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (A[i] === B[j]) { ops.push(['same', A[i], B[j]]); i += 1; j += 1; }
      else if (dp[(i + 1) * w + j] >= dp[i * w + j + 1]) { ops.push(['del', A[i], null]); i += 1; }
      else { ops.push(['add', null, B[j]]); j += 1; }
    }
    while (i < n) { ops.push(['del', A[i], null]); i += 1; }
    while (j < m) { ops.push(['add', null, B[j]]); j += 1; }
    const rows = [];
    let k = 0;
    while (k < ops.length) {
      if (ops[k][0] === 'same') { rows.push(ops[k]); k += 1; continue; }
      const dels = [];
      const adds = [];
      while (k < ops.length && ops[k][0] !== 'same') {
        if (ops[k][0] === 'del') dels.push(ops[k][1]); else adds.push(ops[k][2]);
        k += 1;
      }
      for (let r = 0; r < Math.max(dels.length, adds.length); r += 1) {
        rows.push(['change', r < dels.length ? dels[r] : null, r < adds.length ? adds[r] : null]);
      }
    }
    return rows;
  }

  function renderDiff(box, prev, cur) {
    const prevText = prev && typeof prev.output_text === 'string' ? prev.output_text : '';
    const rows = diffRows(prevText, cur);
    const head = el('div', 'diff-head');
    const left = prev ? 'v' + (prev.version !== null && prev.version !== undefined ? prev.version : '?') : 'no earlier summary';
    head.appendChild(el('span', null, left));
    head.appendChild(el('span', null, 'this summary'));
    box.appendChild(head);
    const table = el('table', 'diff');
    if (!rows) {
      box.appendChild(el('div', 'muted pad', 'too long to compare line by line'));
      box.appendChild(el('pre', 'summary', cur));
      return;
    }
    let added = 0;
    let removed = 0;
    // Unchanged lines more than CONTEXT away from a change fold into one row.
    const CONTEXT = 2;
    const near = rows.map(() => false);
    rows.forEach((row, i) => {
      if (row[0] !== 'change') return;
      for (let k = Math.max(0, i - CONTEXT); k <= Math.min(rows.length - 1, i + CONTEXT); k += 1) near[k] = true;
    });
    const expanded = box.dataset.expanded === '1';
    let i = 0;
    while (i < rows.length) {
      if (!expanded && !near[i]) {
        let j = i;
        while (j < rows.length && !near[j]) j += 1;
        if (j - i > 1) {
          const fold = el('tr', 'd-fold');
          const td = el('td', null, '⋯ ' + (j - i) + ' unchanged lines');
          td.colSpan = 2;
          fold.appendChild(td);
          fold.title = 'show every line';
          fold.addEventListener('click', () => { state.diffExpanded = true; render(); });
          table.appendChild(fold);
          i = j;
          continue;
        }
      }
      const [op, a, b] = rows[i];
      const tr = el('tr', 'd-' + op);
      const l = el('td', 'd-left' + (op === 'change' && a !== null ? ' del' : ''), a === null ? '' : a);
      const r = el('td', 'd-right' + (op === 'change' && b !== null ? ' add' : ''), b === null ? '' : b);
      if (op === 'change') { if (a !== null) removed += 1; if (b !== null) added += 1; }
      tr.appendChild(l);
      tr.appendChild(r);
      table.appendChild(tr);
      i += 1;
    }
    if (!added && !removed && rows.length) table.appendChild(el('tr', 'd-fold')).appendChild(el('td', null, 'identical'));
    box.appendChild(el('div', 'diff-stats muted', '+' + added + ' / −' + removed + ' lines'));
    box.appendChild(table);
  }

  function latestCompaction() {
    const d = state.session.data;
    if (!d || !Array.isArray(d.preflights)) return null;
    for (let i = d.preflights.length - 1; i >= 0; i -= 1) {
      if (d.preflights[i].triggered) return d.preflights[i];
    }
    return null;
  }

  function renderPreflightInspector(box) {
    let id = state.selectedTurn;
    let heading = 'Preflight';
    if (!id) {
      const last = latestCompaction();
      if (!last) {
        box.appendChild(el('div', 'panel-title', 'Inspector'));
        box.appendChild(el('div', 'muted pad', 'Click a turn (a row or a point of the chart) to see its decision; a compaction shows its summary next to the previous one and what was archived.'));
        return;
      }
      id = last.span_id;
      heading = 'Latest compaction';
    }
    loadDetail(id);
    const entry = state.details.get(id);
    box.appendChild(el('div', 'panel-title', heading));
    if (!entry || !entry.data) {
      box.appendChild(el('div', 'muted pad', entry && entry.error ? entry.error : 'loading…'));
      return;
    }
    const d = entry.data;
    const r = d.row;
    const title = el('div', 'insp-title');
    title.appendChild(el('span', 'insp-name', 'Turn ' + r.turn + (r.triggered ? ' · compaction' : '')));
    title.appendChild(el('span', 'status status-' + (r.status === 'error' ? 'error' : 'ok'), r.in_progress ? 'in progress' : r.status));
    box.appendChild(title);
    const dl = el('dl', 'kv kv-wide');
    kv(dl, 'tokens', fmtInt(r.tokens_before) + ' → ' + fmtInt(r.tokens_after));
    kv(dl, 'of window', fmtPct(r.usage_before) + ' → ' + fmtPct(r.usage_after) + ' of ' + fmtInt(r.max_tokens));
    kv(dl, 'trigger', (r.forced ? 'forced: ' + r.forced + '; ' : '') + (r.reason || ''));
    kv(dl, 'tiers', (r.tiers || []).join(' → '));
    kv(dl, 'duration', r.in_progress ? 'in progress' : fmtDuration(r.duration_ms));
    kv(dl, 'started', r.started_at, true);
    kv(dl, 'preflight', r.span_id, true);
    if (r.error) kv(dl, 'failed', r.error);
    box.appendChild(dl);
    if (r.errors && r.errors.length) {
      box.appendChild(el('div', 'section-title', 'Failures and fallbacks'));
      const ul = el('ul', 'errors');
      for (const e of r.errors) {
        const li = el('li');
        li.appendChild(el('b', null, e.error_type || 'error'));
        if (e.fallback) li.appendChild(el('span', 'muted', ' → ' + e.fallback));
        if (e.message) li.appendChild(el('div', 'small', e.message));
        ul.appendChild(li);
      }
      box.appendChild(ul);
    }
    if (r.summary) {
      const s = r.summary;
      box.appendChild(el('div', 'section-title', 'Summary v' + (s.version !== null ? s.version : '?') + (d.previous_summary ? ' vs v' + d.previous_summary.version : '')));
      const sd = el('dl', 'kv kv-wide');
      kv(sd, 'written by', [s.summarizer, s.model, s.strategy].filter(Boolean).join(' · '));
      kv(sd, 'folded', fmtInt(s.input_messages) + ' messages, ' + fmtInt(s.input_tokens) + ' tokens → ' + fmtInt(s.summary_tokens));
      kv(sd, 'latency', typeof s.latency_ms === 'number' ? fmtDuration(s.latency_ms) : '');
      kv(sd, 'facts', factsText(s));
      if (Array.isArray(s.dropped_keys) && s.dropped_keys.length) kv(sd, 'dropped', s.dropped_keys.join(', '), true);
      box.appendChild(sd);
      const diff = el('div', 'diff-box');
      diff.dataset.version = s.version;
      if (state.diffExpanded) diff.dataset.expanded = '1';
      renderDiff(diff, d.previous_summary, d.summary_text || '');
      box.appendChild(diff);
    } else if (r.triggered) {
      box.appendChild(el('div', 'section-title', 'Summary'));
      box.appendChild(el('div', 'muted pad', 'No summary this time: the tiers before summarizing were enough.'));
    }
    if (r.pruned) {
      const p = r.pruned;
      box.appendChild(el('div', 'section-title', 'Left the context'));
      const pd = el('dl', 'kv kv-wide');
      kv(pd, 'capped', p.capped);
      kv(pd, 'cleared', p.cleared);
      kv(pd, 'summarized', p.summarized);
      kv(pd, 'dropped', p.dropped);
      if (p.kept && typeof p.kept === 'object') kv(pd, 'kept', Object.entries(p.kept).map(([k, v]) => k + ' ' + v).join(', '));
      kv(pd, 'step', p.step);
      box.appendChild(pd);
    }
    if (r.archival) {
      const a = r.archival;
      box.appendChild(el('div', 'section-title', 'Archived' + (a.storage_adapter ? ' (' + a.storage_adapter + ')' : '')));
      const ul = el('ul', 'archived');
      for (const k of a.keys) ul.appendChild(el('li', 'mono', k));
      for (const k of a.spooled) ul.appendChild(el('li', 'mono spooled', 'spooled: ' + k));
      box.appendChild(ul);
      if (typeof a.bytes === 'number') box.appendChild(el('div', 'muted pad small', fmtInt(a.bytes) + ' bytes written'));
    }
    const raw = el('details', 'raw');
    raw.appendChild(el('summary', 'section-title', d.spans.length + ' spans (JSON)'));
    let text;
    try { text = JSON.stringify(d.spans.map((sp) => Object.assign({}, sp, { data: Object.assign({}, sp.data, sp.data && sp.data.output_text ? { output_text: '(shown above)' } : {}) })), null, 2); } catch (_) { text = ''; }
    raw.appendChild(el('pre', 'json', text));
    box.appendChild(raw);
  }

  // ---- span view -------------------------------------------------------

  function spanVisible(s) {
    if (state.hiddenKinds.has(s.kind)) return false;
    if (state.errorsOnly && s.status !== 'error') return false;
    if (state.text && !(s.name.toLowerCase().includes(state.text) || s.kind.toLowerCase().includes(state.text))) return false;
    return true;
  }

  function traceBounds(t) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const s of t.spans.values()) {
      if (Number.isFinite(s.start) && s.start < lo) lo = s.start;
      const e = Number.isFinite(s.end) ? s.end : s.start;
      if (Number.isFinite(e) && e > hi) hi = e;
    }
    const ts = ms(t.info.started_at);
    const te = ms(t.info.ended_at);
    if (Number.isFinite(ts) && ts < lo) lo = ts;
    if (Number.isFinite(te) && te > hi) hi = te;
    if (!Number.isFinite(lo)) return null;
    if (!Number.isFinite(hi) || hi < lo) hi = lo;
    return { lo: lo, hi: hi };
  }

  // Depth-first order by parent_id; siblings by start time. Spans whose
  // parent is unknown (not yet arrived) are roots.
  function ordered(t) {
    const children = new Map();
    const roots = [];
    for (const s of t.spans.values()) {
      if (s.parent_id && s.parent_id !== s.span_id && t.spans.has(s.parent_id)) {
        if (!children.has(s.parent_id)) children.set(s.parent_id, []);
        children.get(s.parent_id).push(s);
      } else {
        roots.push(s);
      }
    }
    const key = (s) => (Number.isFinite(s.start) ? s.start : Infinity);
    const byStart = (a, b) => (key(a) - key(b)) || ((a.end || 0) - (b.end || 0));
    roots.sort(byStart);
    const out = [];
    const seen = new Set();
    const stack = roots.slice().reverse().map((s) => [s, 0]);
    while (stack.length) {
      const [s, depth] = stack.pop();
      if (seen.has(s.span_id)) continue;
      seen.add(s.span_id);
      out.push([s, depth]);
      const kids = (children.get(s.span_id) || []).slice().sort(byStart);
      for (let i = kids.length - 1; i >= 0; i -= 1) stack.push([kids[i], depth + 1]);
    }
    return out;
  }

  function renderKinds() {
    const box = $('kinds');
    box.replaceChildren();
    box.appendChild(el('span', 'kinds-label', 'kinds'));
    const kinds = Array.from(state.kinds.keys()).sort();
    for (const k of kinds) {
      const chip = el('button', 'chip ' + kindClass(k) + (state.hiddenKinds.has(k) ? ' off' : ''));
      chip.type = 'button';
      chip.dataset.kind = k;
      chip.appendChild(el('span', 'dot'));
      chip.appendChild(el('span', null, k));
      chip.appendChild(el('span', 'chip-count', state.kinds.get(k)));
      chip.title = state.hiddenKinds.has(k) ? 'show ' + k : 'hide ' + k;
      chip.addEventListener('click', () => {
        if (state.hiddenKinds.has(k)) state.hiddenKinds.delete(k); else state.hiddenKinds.add(k);
        render();
      });
      box.appendChild(chip);
    }
  }

  function renderTimeline(sorted) {
    const box = $('timeline');
    box.replaceChildren();
    const shown = state.selectedTrace ? sorted.filter((t) => t.id === state.selectedTrace) : sorted;
    if (state.selectedTrace && !shown.length && state.traces.has(state.selectedTrace)) shown.push(state.traces.get(state.selectedTrace));
    for (const t of shown) {
      const b = traceBounds(t);
      const section = el('div', 'trace-block');
      section.dataset.traceId = t.id;
      const header = el('div', 'trace-header');
      header.appendChild(el('span', 'trace-title', t.info.name || 'trace'));
      header.appendChild(el('span', 'mono trace-header-id', t.id));
      if (b) header.appendChild(el('span', 'muted', fmtDate(b.lo) + ' · ' + fmtDuration(b.hi - b.lo)));
      if (t.info.metadata && typeof t.info.metadata === 'object') {
        for (const [k, v] of Object.entries(t.info.metadata).slice(0, 4)) {
          header.appendChild(el('span', 'meta-tag', k + '=' + v));
        }
      }
      section.appendChild(header);
      if (!b) {
        section.appendChild(el('div', 'muted pad', t.loaded ? 'no spans' : 'spans not loaded yet — select the trace'));
        if (!t.loaded && state.view === 'spans') section.addEventListener('click', () => loadTraceDetail(t.id));
        box.appendChild(section);
        continue;
      }
      const span = Math.max(b.hi - b.lo, 1);
      const axis = el('div', 'row axis');
      axis.appendChild(el('div', 'label', ''));
      const ticks = el('div', 'bars');
      for (let i = 0; i <= 4; i += 1) {
        const tick = el('span', 'tick', i === 0 ? '0' : '+' + fmtDuration((span * i) / 4));
        tick.style.left = (i * 25) + '%';
        if (i === 4) tick.classList.add('tick-end');
        ticks.appendChild(tick);
      }
      axis.appendChild(ticks);
      section.appendChild(axis);
      for (const [s, depth] of ordered(t)) {
        if (!spanVisible(s)) continue;
        const key = s.trace_id + '\u0000' + s.span_id;
        const selected = state.selectedSpan === key || state.selectedSpan === s.span_id;
        const row = el('div', 'row span-row ' + kindClass(s.kind) +
          (s.status === 'error' ? ' error' : '') + (isCompact(s) ? ' compact' : '') + ' ' + nameClass(s.name) +
          (s.inProgress ? ' in-progress' : '') + (selected ? ' selected' : ''));
        row.dataset.spanId = s.span_id;
        const label = el('div', 'label');
        label.style.paddingLeft = (8 + Math.min(depth, 12) * 14) + 'px';
        if (!isCompact(s)) label.appendChild(el('span', 'kind-badge ' + kindClass(s.kind), s.kind));
        label.appendChild(el('span', 'span-name', s.name));
        // compact.recall: the agent asked for something compaction took out; its hit count says whether it got it.
        if (s.name === 'compact.recall' && typeof s.data.hits === 'number') {
          label.appendChild(el('span', 'recall-hits', s.data.hits + (s.data.hits === 1 ? ' hit' : ' hits')));
        }
        label.title = s.name + ' (' + s.kind + ')' + (s.inProgress ? ', in progress' : '');
        row.appendChild(label);
        const bars = el('div', 'bars');
        const bar = el('div', 'bar');
        const start = Number.isFinite(s.start) ? s.start : b.lo;
        // In flight: drawn up to the latest time the trace has seen.
        const end = s.inProgress ? b.hi : s.end;
        const left = ((start - b.lo) / span) * 100;
        const width = ((end - start) / span) * 100;
        bar.style.left = Math.min(left, 99.5) + '%';
        bar.style.width = Math.max(width, 0.4) + '%';
        bars.appendChild(bar);
        const dur = el('span', 'dur' + (s.inProgress ? ' in-progress-label' : ''), s.inProgress ? 'in progress' : fmtDuration(s.end - s.start));
        if (left + width > 82) { dur.classList.add('dur-left'); dur.style.right = (100 - left + 0.5) + '%'; }
        else { dur.style.left = (left + width + 0.5) + '%'; }
        bars.appendChild(dur);
        row.appendChild(bars);
        row.addEventListener('click', () => { state.selectedSpan = key; render(); });
        section.appendChild(row);
      }
      box.appendChild(section);
    }
  }

  function findSelectedSpan() {
    if (!state.selectedSpan) return null;
    const sep = state.selectedSpan.indexOf('\u0000');
    if (sep >= 0) {
      const t = state.traces.get(state.selectedSpan.slice(0, sep));
      return t ? t.spans.get(state.selectedSpan.slice(sep + 1)) || null : null;
    }
    for (const t of state.traces.values()) {
      const s = t.spans.get(state.selectedSpan);
      if (s) return s;
    }
    return null;
  }

  function latestSummary() {
    let best = null;
    for (const t of state.traces.values()) {
      if (state.selectedTrace && t.id !== state.selectedTrace) continue;
      for (const s of t.spans.values()) {
        if (typeof s.data.output_text === 'string' && s.data.output_text && (!best || s.end >= best.end)) best = s;
      }
    }
    return best;
  }

  function renderSpanInspector(box) {
    let s = findSelectedSpan();
    let heading = 'Span';
    if (!s) {
      s = latestSummary();
      heading = 'Latest summary';
      if (!s) {
        box.appendChild(el('div', 'panel-title', 'Inspector'));
        box.appendChild(el('div', 'muted pad', 'Select a span to see its data. Compaction summaries (data.output_text) show here as text.'));
        return;
      }
    }
    box.appendChild(el('div', 'panel-title', heading));
    const title = el('div', 'insp-title');
    title.appendChild(el('span', 'kind-badge ' + kindClass(s.kind), s.kind));
    title.appendChild(el('span', 'insp-name', s.name));
    title.appendChild(el('span', 'status status-' + s.status, s.status));
    if (s.inProgress) title.appendChild(el('span', 'status status-progress', 'in progress'));
    box.appendChild(title);
    const dl = el('dl', 'kv');
    kv(dl, 'trace', s.trace_id, true);
    kv(dl, 'span', s.span_id, true);
    kv(dl, 'parent', s.parent_id, true);
    kv(dl, 'started', s.started_at, true);
    kv(dl, 'ended', s.inProgress ? 'in progress' : s.ended_at, !s.inProgress);
    kv(dl, 'duration', s.inProgress ? '' : fmtDuration(s.end - s.start));
    box.appendChild(dl);
    if (typeof s.data.output_text === 'string' && s.data.output_text) {
      box.appendChild(el('div', 'section-title', 'Summary (output_text)'));
      box.appendChild(el('pre', 'summary', s.data.output_text));
    }
    const rest = Object.assign({}, s.data);
    delete rest.output_text;
    box.appendChild(el('div', 'section-title', 'data'));
    let text;
    try { text = JSON.stringify(rest, null, 2); } catch (_) { text = String(rest); }
    box.appendChild(el('pre', 'json', text));
  }

  // ---- render ------------------------------------------------------------

  function render() {
    const sorted = tracesSorted();
    const sessionView = state.view === 'session' && state.sessionsApi !== false;
    // The fleet table needs the room; the inspector has nothing to say there.
    document.body.classList.toggle('fleet-mode', sessionView && !state.selectedTrace);
    $('tab-session').classList.toggle('on', sessionView);
    $('tab-spans').classList.toggle('on', !sessionView);
    $('session-view').style.display = sessionView ? '' : 'none';
    $('span-view').style.display = sessionView ? 'none' : '';
    renderCounters();
    renderHasChips();
    renderTraceList(sorted);
    if (sessionView) renderSession(sorted);
    else { renderKinds(); renderTimeline(sorted); }
    const box = $('inspector');
    box.replaceChildren();
    if (sessionView && state.selectedTrace) renderPreflightInspector(box);
    else renderSpanInspector(box);
    $('empty').style.display = state.traces.size === 0 ? '' : 'none';
  }

  function setView(v) {
    state.view = v;
    state.viewChosen = true;
    if (v === 'spans') {
      if (state.selectedTrace) loadTraceDetail(state.selectedTrace);
      else for (const t of tracesSorted().slice(0, HISTORY_DETAILS)) loadTraceDetail(t.id);
    } else if (state.selectedTrace) {
      loadSession();
    }
    syncUrl();
    render();
  }

  // ---- wiring -----------------------------------------------------------

  $('tab-session').addEventListener('click', () => setView('session'));
  $('tab-spans').addEventListener('click', () => setView('spans'));
  $('f-text').addEventListener('input', (e) => { state.text = e.target.value.trim().toLowerCase(); schedule(); });
  $('f-errors').addEventListener('change', (e) => { state.errorsOnly = e.target.checked; schedule(); });
  let searchTimer = null;
  $('f-session').addEventListener('input', (e) => {
    state.fleetQuery = e.target.value.trim();
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { loadFleet(); render(); }, 150);
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { state.selectedSpan = null; state.selectedTurn = null; syncUrl(); render(); }
  });
  // The chart is drawn to the width it has: draw it again when that changes.
  let resizeTimer = null;
  window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(render, 100); });
  // Relative times ("12 s ago") and in-progress durations move on their own.
  setInterval(() => { if (!pending) render(); }, 5000);

  render();
  connect();
  loadFleet().then(() => {
    if (state.view === 'spans' || state.sessionsApi === false) {
      const first = tracesSorted().slice(0, HISTORY_DETAILS).map((t) => t.id);
      if (state.selectedTrace && !first.includes(state.selectedTrace)) first.unshift(state.selectedTrace);
      return Promise.all(first.map(loadTraceDetail));
    }
    if (state.selectedTrace) loadSession();
    if (state.selectedTurn) loadDetail(state.selectedTurn);
    return null;
  });
})();
