// compact trace timeline: live view of Ariadne events.
// Sources: GET /api/traces?limit= and GET /api/traces/{id} (history),
// GET /events (SSE, live; the browser resumes with Last-Event-ID).
// A read token given as /?token=T is passed on as ?access_token=T.
'use strict';

(function () {
  const MAX_TRACES = 300;          // traces kept in memory
  const MAX_SPANS_PER_TRACE = 4000; // spans kept per trace
  const HISTORY_LIMIT = 100;        // traces listed from history
  const HISTORY_DETAILS = 12;       // of which loaded with their spans up front

  const params = new URLSearchParams(window.location.search);
  const token = params.get('token') || params.get('access_token') || '';

  const state = {
    traces: new Map(),   // trace_id -> {id, info, spans: Map, loaded, lastActivity}
    selectedTrace: params.get('trace') || null,
    selectedSpan: params.get('span') || null, // "trace_id\u0000span_id" or span_id
    hiddenKinds: new Set(),
    kinds: new Map(),    // kind -> count
    text: '',
    errorsOnly: false,
    counts: { events: 0, spans: 0, errors: 0, compact: 0 },
  };

  const $ = (id) => document.getElementById(id);

  function withToken(path) {
    if (!token) return path;
    return path + (path.includes('?') ? '&' : '?') + 'access_token=' + encodeURIComponent(token);
  }

  function fetchJson(path) {
    const headers = token ? { Authorization: 'Bearer ' + token } : {};
    return fetch(withToken(path), { headers: headers }).then((r) => {
      if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
      return r.json();
    });
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
      t = { id: id, info: {}, spans: new Map(), loaded: false, lastActivity: 0 };
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
    const w = Number.isFinite(when) ? when : Date.now();
    if (w > t.lastActivity) t.lastActivity = w;
  }

  function addTrace(ev) {
    if (!ev || typeof ev.trace_id !== 'string') return;
    const t = traceOf(ev.trace_id);
    for (const k of ['name', 'group_id', 'started_at', 'ended_at', 'metadata']) {
      if (ev[k] !== undefined && ev[k] !== null) t.info[k] = ev[k];
    }
    touch(t, ms(ev.ended_at || ev.started_at));
  }

  function addSpan(ev) {
    if (!ev || typeof ev.trace_id !== 'string' || typeof ev.span_id !== 'string') return;
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
    if (!Number.isFinite(span.start)) span.start = Number.isFinite(span.end) ? span.end : Date.now();
    if (!Number.isFinite(span.end) || span.end < span.start) span.end = span.start;
    t.spans.set(ev.span_id, span);
    if (fresh) {
      state.counts.spans += 1;
      if (span.status === 'error') state.counts.errors += 1;
      if (isCompact(span)) state.counts.compact += 1;
      state.kinds.set(span.kind, (state.kinds.get(span.kind) || 0) + 1);
    }
    touch(t, span.end);
  }

  function ingest(ev) {
    if (!ev || typeof ev !== 'object') return;
    if (ev.type === 'trace') addTrace(ev);
    else if (ev.type === 'span' || ev.span_id) addSpan(ev);
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
      ingest(ev);
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
    if (t && t.loaded) return Promise.resolve();
    return fetchJson('/api/traces/' + encodeURIComponent(id)).then((body) => {
      if (body && body.trace && typeof body.trace === 'object') {
        addTrace(Object.assign({ trace_id: id }, body.trace));
      }
      for (const ev of listOf(body, 'spans')) addSpan(Object.assign({ trace_id: id }, ev));
      for (const ev of listOf(body, 'events')) ingest(ev);
      traceOf(id).loaded = true;
      schedule();
    }).catch((e) => console.warn('[compact] trace history', e));
  }

  function loadHistory() {
    return fetchJson('/api/traces?limit=' + HISTORY_LIMIT).then((body) => {
      const list = listOf(body, 'traces');
      for (const tr of list) {
        if (!tr || typeof tr.trace_id !== 'string') continue;
        addTrace(tr);
        const t = traceOf(tr.trace_id);
        if (typeof tr.event_count === 'number') t.eventCount = tr.event_count;
      }
      schedule();
      const first = list.slice(0, HISTORY_DETAILS).map((tr) => tr && tr.trace_id).filter(Boolean);
      if (state.selectedTrace && !first.includes(state.selectedTrace)) first.unshift(state.selectedTrace);
      return Promise.all(first.map(loadTraceDetail));
    }).catch((e) => console.warn('[compact] history', e));
  }

  // ---- rendering --------------------------------------------------------

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

  function fmtDuration(d) {
    if (!Number.isFinite(d) || d < 0) return '';
    if (d < 1) return '<1 ms';
    if (d < 1000) return Math.round(d) + ' ms';
    if (d < 60000) return (d / 1000).toFixed(d < 10000 ? 2 : 1) + ' s';
    const m = Math.floor(d / 60000);
    return m + ' m ' + Math.round((d % 60000) / 1000) + ' s';
  }

  function fmtTime(t) {
    if (!Number.isFinite(t)) return '';
    const iso = new Date(t).toISOString();
    return iso.slice(11, 23);
  }

  function fmtDate(t) {
    if (!Number.isFinite(t)) return '';
    const iso = new Date(t).toISOString();
    return iso.slice(0, 10) + ' ' + iso.slice(11, 19) + 'Z';
  }

  function kindClass(kind) {
    return 'k-' + String(kind).toLowerCase().replace(/[^a-z0-9]+/g, '-');
  }

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
      if (s.start < lo) lo = s.start;
      if (s.end > hi) hi = s.end;
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
    const byStart = (a, b) => (a.start - b.start) || (a.end - b.end);
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

  function tracesSorted() {
    return Array.from(state.traces.values()).sort((a, b) => b.lastActivity - a.lastActivity);
  }

  function traceStats(t) {
    let errors = 0;
    let compact = 0;
    for (const s of t.spans.values()) {
      if (s.status === 'error') errors += 1;
      if (isCompact(s)) compact += 1;
    }
    return { errors: errors, compact: compact };
  }

  function renderCounters() {
    $('c-events').textContent = state.counts.events;
    $('c-traces').textContent = state.traces.size;
    $('c-spans').textContent = state.counts.spans;
    $('c-compact').textContent = state.counts.compact;
    $('c-errors').textContent = state.counts.errors;
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

  function renderTraceList(sorted) {
    const ul = $('trace-list');
    ul.replaceChildren();
    const all = el('li', 'trace-item trace-all' + (state.selectedTrace ? '' : ' selected'));
    all.appendChild(el('div', 'trace-name', 'All traces'));
    all.appendChild(el('div', 'trace-meta', sorted.length + ' traces'));
    all.addEventListener('click', () => { state.selectedTrace = null; render(); });
    ul.appendChild(all);
    for (const t of sorted) {
      const st = traceStats(t);
      const li = el('li', 'trace-item' + (state.selectedTrace === t.id ? ' selected' : ''));
      li.dataset.traceId = t.id;
      const head = el('div', 'trace-head');
      head.appendChild(el('span', 'trace-name', t.info.name || (t.info.metadata && t.info.metadata.agent_name) || 'trace'));
      if (st.errors) head.appendChild(el('span', 'badge badge-err', st.errors + ' err'));
      if (st.compact) head.appendChild(el('span', 'badge badge-compact', st.compact + ' compact'));
      li.appendChild(head);
      li.appendChild(el('div', 'trace-id mono', t.id));
      const count = t.spans.size || t.eventCount || 0;
      li.appendChild(el('div', 'trace-meta', count + ' spans · ' + fmtDate(t.lastActivity)));
      li.addEventListener('click', () => {
        state.selectedTrace = t.id;
        loadTraceDetail(t.id);
        render();
      });
      ul.appendChild(li);
    }
  }

  function renderTimeline(sorted) {
    const box = $('timeline');
    box.replaceChildren();
    const shown = state.selectedTrace ? sorted.filter((t) => t.id === state.selectedTrace) : sorted;
    let rows = 0;
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
        rows += 1;
        const key = s.trace_id + '\u0000' + s.span_id;
        const selected = state.selectedSpan === key || state.selectedSpan === s.span_id;
        const row = el('div', 'row span-row ' + kindClass(s.kind) +
          (s.status === 'error' ? ' error' : '') + (isCompact(s) ? ' compact' : '') + (selected ? ' selected' : ''));
        row.dataset.spanId = s.span_id;
        const label = el('div', 'label');
        label.style.paddingLeft = (8 + Math.min(depth, 12) * 14) + 'px';
        label.appendChild(el('span', 'kind-badge ' + kindClass(s.kind), s.kind));
        label.appendChild(el('span', 'span-name', s.name));
        label.title = s.name + ' (' + s.kind + ')';
        row.appendChild(label);
        const bars = el('div', 'bars');
        const bar = el('div', 'bar');
        const left = ((s.start - b.lo) / span) * 100;
        const width = ((s.end - s.start) / span) * 100;
        bar.style.left = Math.min(left, 99.5) + '%';
        bar.style.width = Math.max(width, 0.4) + '%';
        bars.appendChild(bar);
        const dur = el('span', 'dur', fmtDuration(s.end - s.start));
        if (left + width > 82) { dur.classList.add('dur-left'); dur.style.right = (100 - left + 0.5) + '%'; }
        else { dur.style.left = (left + width + 0.5) + '%'; }
        bars.appendChild(dur);
        row.appendChild(bars);
        row.addEventListener('click', () => { state.selectedSpan = key; render(); });
        section.appendChild(row);
      }
      box.appendChild(section);
    }
    $('empty').style.display = state.traces.size === 0 ? '' : 'none';
    return rows;
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

  function kv(dl, k, v, mono) {
    if (v === undefined || v === null || v === '') return;
    dl.appendChild(el('dt', null, k));
    dl.appendChild(el('dd', mono ? 'mono' : null, v));
  }

  function renderInspector() {
    const box = $('inspector');
    box.replaceChildren();
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
    box.appendChild(title);
    const dl = el('dl', 'kv');
    kv(dl, 'trace', s.trace_id, true);
    kv(dl, 'span', s.span_id, true);
    kv(dl, 'parent', s.parent_id, true);
    kv(dl, 'started', s.started_at, true);
    kv(dl, 'ended', s.ended_at, true);
    kv(dl, 'duration', fmtDuration(s.end - s.start));
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

  function render() {
    const sorted = tracesSorted();
    renderCounters();
    renderKinds();
    renderTraceList(sorted);
    renderTimeline(sorted);
    renderInspector();
  }

  // ---- wiring -----------------------------------------------------------

  $('f-text').addEventListener('input', (e) => { state.text = e.target.value.trim().toLowerCase(); schedule(); });
  $('f-errors').addEventListener('change', (e) => { state.errorsOnly = e.target.checked; schedule(); });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { state.selectedSpan = null; render(); }
  });

  render();
  connect();
  loadHistory();
})();
