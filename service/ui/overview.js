// Owns the Overview page: every tuned kernel of the cache, filtered, searched and paged by the
// service (GET /v1/kernels: words found in the key, the kernel's expression or a GPU product's name;
// fields without case, a target prefix), one row per kernel with its winner (or fastest estimate),
// labels, its newest record, and who stored it when; ordered by winner, by the newest record's
// arrival or by the newest measured time. The filters live in the page's address (they are not
// secrets) so a view can be shared.
'use strict';

(function () {
  const T = window.Tessera;
  const PAGE = 50;
  const state = {q: '', family: '', dtype: '', target: '', label: '', order: 'recent', offset: 0};

  function readAddress() {
    const p = new URLSearchParams(location.search);
    for (const k of Object.keys(state)) if (p.has(k)) state[k] = k === 'offset' ? Math.max(0, parseInt(p.get(k), 10) || 0) : p.get(k);
    for (const k of ['q', 'family', 'dtype', 'target', 'label', 'order']) T.$(k).value = state[k];
  }

  function writeAddress() {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(state)) if (v && !(k === 'order' && v === 'recent')) p.set(k, v);
    const s = p.toString();
    history.replaceState(null, '', s ? '?' + s : location.pathname);
  }

  function labels(row) {
    const tags = [T.tag(row.label)];
    const r = row.shown;
    if (r && r.result && r.result.remeasured) tags.push(T.tag('remeasured', 'the winner of a tuning run, re-measured interleaved'));
    if (row.stale) tags.push(T.tag('stale', 'measured with another toolchain than the service runs'));
    // Whose word the shown record stands on: a claim never reads like a reproduced measurement.
    if (r) tags.push(T.trustTag(r));
    return tags;
  }

  function renderRow(row) {
    const k = row.key;
    const r = row.shown;
    const tp = row.throughput || {value: 0, unit: ''};
    const cell = (col, value, text, cls) => T.el('td', {class: cls, dataset: {col: col, value: value}}, text);
    return T.el('tr', {dataset: {key: row.key_id}},
      T.el('td', {dataset: {col: 'kernel'}}, T.el('a', {href: 'kernel.html?key=' + row.key_id}, T.kernelName(k))),
      cell('layout', k.layout, k.layout),
      cell('target', k.target, k.target, null),
      cell('units', k.units, String(k.units), 'num'),
      cell('time', r ? r.result.median_us : '', r ? T.fmtTime(r.result.median_us) : '-', 'num'),
      cell('throughput', r ? tp.value : '', r ? T.fmtThroughput(tp.value, tp.unit) : '-', 'num'),
      cell('peak', r ? r.result.peak_fraction : '', r ? T.fmtPct(r.result.peak_fraction) : '-', 'num'),
      T.el('td', {dataset: {col: 'labels'}}, labels(row)),
      cell('records', row.records, String(row.records), 'num'),
      T.el('td', {dataset: {col: 'newest', id: row.newest_id || 0, measured: row.newest_measured || ''}},
        row.newest_id ? '#' + row.newest_id + ', measured ' + (row.newest_measured || '-') : '-'),
      cell('received', r ? r.received_at || '' : '', r ? r.received_at || '-' : '-'),
      cell('writer', r ? r.writer || '' : '', r ? r.writer || '(local)' : '-'));
  }

  async function load() {
    T.clearError();
    const p = new URLSearchParams();
    for (const k of ['q', 'family', 'dtype', 'target', 'label', 'order']) if (state[k]) p.set(k, state[k]);
    p.set('offset', String(state.offset));
    p.set('limit', String(PAGE));
    writeAddress();
    let data;
    try {
      data = await T.api('v1/kernels?' + p.toString());
    } catch (err) {
      if (!(err instanceof T.ApiError && err.status === 401)) T.showError(err);
      return;
    }
    const body = T.clear(document.querySelector('#kernels tbody'));
    for (const row of data.kernels) body.appendChild(renderRow(row));
    const first = data.total ? state.offset + 1 : 0;
    const last = state.offset + data.kernels.length;
    T.text(T.$('count'), data.total === 0 ? 'no kernels match' : first + '-' + last + ' of ' + data.total + ' kernels');
    T.$('count').dataset.total = String(data.total);
    T.text(T.$('page'), 'page ' + (Math.floor(state.offset / PAGE) + 1) + ' of ' + Math.max(1, Math.ceil(data.total / PAGE)));
    T.$('prev').disabled = state.offset === 0;
    T.$('next').disabled = last >= data.total;
  }

  function apply(ev) {
    if (ev) ev.preventDefault();
    for (const k of ['q', 'family', 'dtype', 'target', 'label', 'order']) state[k] = T.$(k).value.trim();
    state.offset = 0;
    load();
  }

  let wired = false;
  T.start(function () {
    readAddress();
    if (wired) return load();
    wired = true;
    T.$('filters').addEventListener('submit', apply);
    for (const id of ['family', 'label', 'order']) T.$(id).addEventListener('change', apply);
    let timer = null;
    T.$('q').addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(apply, 300);
    });
    T.$('prev').addEventListener('click', () => {
      state.offset = Math.max(0, state.offset - PAGE);
      load();
    });
    T.$('next').addEventListener('click', () => {
      state.offset += PAGE;
      load();
    });
    return load();
  });
})();
