// Owns what every dashboard page shares: the token (typed into the page, kept in sessionStorage,
// sent as an Authorization header, never in a URL), calls to the service's /v1 API, building the
// DOM from data with every string from the server as text (record fields come from clients and
// are treated as hostile: no HTML is ever parsed from them), number and time formats, charts'
// registry, and the page frame (navigation, sign-in prompt, errors).
'use strict';

(function () {
  const TOKEN_KEY = 'tessera.token';
  const T = {};
  window.Tessera = T;
  T.report = document.body.dataset.mode === 'report';
  T.charts = {};  // canvas id -> Chart (the tests read their data points)

  // ---- DOM from data: strings become text nodes, attributes are set one by one ----
  T.el = function (tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'dataset') {
        for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
      } else if (k === 'on') {
        for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      } else if (k === 'href') {
        e.setAttribute('href', T.safeHref(v));
      } else if (/^on/i.test(k) || k === 'style' || k === 'src') {
        throw new Error('attribute ' + k + ' is not set from data');
      } else {
        e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    return T.append(e, children);
  };
  T.append = function (e, children) {
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  };
  T.text = function (e, s) {
    e.textContent = s === null || s === undefined ? '' : String(s);
    return e;
  };
  T.clear = function (e) {
    while (e.firstChild) e.removeChild(e.firstChild);
    return e;
  };
  T.$ = (id) => document.getElementById(id);
  // Links the pages build: one of the dashboard's pages with a query of plain characters; anything
  // else (a javascript: URL from a hostile string) becomes a dead link.
  T.safeHref = function (h) {
    h = String(h);
    return /^(\.\/|[a-z]+\.html)(\?[A-Za-z0-9_.~%=&+-]*)?$/.test(h) ? h : '#';
  };
  T.query = (name) => new URLSearchParams(location.search).get(name);

  // ---- formats ----
  T.fmtTime = function (us) {
    if (us === null || us === undefined || !isFinite(us)) return '-';
    if (us < 1) return us.toFixed(3) + ' us';
    if (us < 1e3) return us.toFixed(2) + ' us';
    if (us < 1e6) return (us / 1e3).toFixed(3) + ' ms';
    return (us / 1e6).toFixed(3) + ' s';
  };
  // GPU figures in TFLOP/s and TB/s, a CPU's in GFLOP/s and GB/s (as the CLI prints them).
  T.fmtThroughput = function (v, unit) {
    if (!isFinite(v) || v <= 0) return '-';
    if (unit === 'GB/s') return v >= 1e3 ? (v / 1e3).toFixed(2) + ' TB/s' : v.toFixed(1) + ' GB/s';
    return v >= 1e4 ? (v / 1e3).toFixed(1) + ' TFLOP/s' : v.toFixed(1) + ' GFLOP/s';
  };
  T.fmtPct = (f) => (isFinite(f) && f > 0 ? (100 * f).toFixed(1) + '%' : '-');
  T.fmtShape = (s) => (Array.isArray(s) ? s.join('x') : '');
  T.epoch = function (utc) {
    const t = Date.parse(utc || '');
    return isNaN(t) ? null : t / 1000;
  };
  T.fmtDate = function (sec) {
    if (sec === null || !isFinite(sec)) return '-';
    return new Date(sec * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  };
  // Axis labels of a span of `span` seconds: the date only where the span needs it.
  T.fmtTick = function (sec, span) {
    if (!isFinite(sec)) return '';
    const iso = new Date(sec * 1000).toISOString();
    return span < 86400 ? iso.slice(11, 19) : span < 30 * 86400 ? iso.slice(5, 16).replace('T', ' ') : iso.slice(0, 10);
  };
  T.ago = function (sec, now) {
    if (!sec) return 'never';
    const d = Math.max(0, (now || Date.now() / 1000) - sec);
    if (d < 90) return Math.round(d) + ' s ago';
    if (d < 5400) return Math.round(d / 60) + ' min ago';
    return Math.round(d / 3600) + ' h ago';
  };
  // The dimensions by name, as the key orders them (measure/records.cpp).
  T.fmtShapeNamed = function (key) {
    const s = key.shape || [];
    const names = key.family === 'attention' ? ['batch', 'heads', 'kv heads', 'query length', 'key length', 'head dim']
      : key.family === 'gemm' ? (s.length === 4 ? ['batch', 'M', 'N', 'K'] : ['M', 'N', 'K']) : [];
    return names.length === s.length ? s.map((v, i) => names[i] + ' ' + v).join(', ') : T.fmtShape(s);
  };
  T.kernelName = (key) => key.family + ' ' + T.fmtShape(key.shape) + ' ' + key.dtype;
  T.tag = (name, title) => T.el('span', {class: 'tag tag-' + name.replace(/[^a-z-]/g, ''), title: title}, name);
  // A config as "knob=value" words the browser may break between, not raw JSON cut mid-word.
  T.fmtConfig = function (c) {
    if (!c || typeof c !== 'object') return String(c || '');
    return Object.entries(c).map(([k, v]) => k + '=' + (typeof v === 'object' ? JSON.stringify(v) : String(v))).join(', ');
  };

  // ---- trust: whose word a record stands on (the service's `trust` field) ----
  // Each tier is shown as itself; a tier this page does not know is shown as unconfirmed, so that
  // nothing the service has not vouched for can look like a reproduced measurement.
  const TRUST = {
    reproduced: ['reproduced', 'another identity measured the same config and agreed'],
    confirmed: ['reproduced', 'another identity measured the same config and agreed'],
    vouched: ['reproduced', 'pinned by an admin or measured by the store\'s own machine'],
    claim: ['claim', 'one writer\'s measurement that no other identity has reproduced yet'],
    disputed: ['disputed', 'another identity\'s measurement of the same config contradicts it'],
    refuted: ['disputed', 'another identity\'s measurement of the same config contradicts it'],
    estimate: ['estimate', 'the analytic model\'s prediction: nothing ran'],
  };
  // {tier: reproduced | claim | disputed | estimate | unconfirmed, word: the service's own, title}
  T.trustOf = function (r) {
    if (!r) return null;
    if (r.status === 'estimated') return {tier: 'estimate', word: 'estimate', title: TRUST.estimate[1]};
    const t = Object.prototype.hasOwnProperty.call(TRUST, r.trust) ? TRUST[r.trust] : null;
    if (!t) return {tier: 'unconfirmed', word: 'unconfirmed', title: 'the service says nothing this page knows about who reproduced it'};
    return {tier: t[0], word: r.trust, title: t[1]};
  };
  T.trustTag = function (r) {
    const t = T.trustOf(r);
    if (!t) return null;
    return T.el('span', {class: 'tag trust trust-' + t.tier, title: t.title, dataset: {trust: t.tier}}, t.word);
  };

  // ---- loading states ----
  T.loading = function (id, what) {
    const e = T.$(id);
    if (!e) return;
    e.hidden = !what;
    T.text(e, what || '');
  };
  // Math.max(...xs) overflows the call stack for long arrays.
  T.max = (xs) => xs.reduce((a, b) => (b > a ? b : a), -Infinity);
  T.min = (xs) => xs.reduce((a, b) => (b < a ? b : a), Infinity);
  T.median = function (xs) {
    const s = xs.slice().sort((a, b) => a - b);
    const n = s.length;
    if (!n) return null;
    return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  };

  // ---- the API ----
  class ApiError extends Error {
    constructor(status, problem) {
      super((problem && (problem.detail || problem.title)) || 'HTTP ' + status);
      this.status = status;
      this.problem = problem;
    }
  }
  T.ApiError = ApiError;
  T.token = () => sessionStorage.getItem(TOKEN_KEY);

  // `path` is relative to the service root ("v1/kernels?..."); the pages live under /ui/, so the
  // calls work wherever a proxy mounts the service.
  T.api = async function (path, opts) {
    if (T.report) throw new Error('a report calls no service');
    opts = opts || {};
    const headers = {Accept: 'application/json'};
    const tok = T.token();
    if (tok) headers.Authorization = 'Bearer ' + tok;
    let body;
    if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const resp = await fetch('../' + path, {
      method: opts.method || 'GET', headers: headers, body: body, cache: 'no-store', credentials: 'omit',
      redirect: 'error', referrerPolicy: 'no-referrer',
    });
    const text = await resp.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (resp.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin((data && data.detail) || 'sign in again');
    }
    if (!resp.ok) throw new ApiError(resp.status, data);
    return data;
  };

  // ---- frame ----
  T.showError = function (err) {
    const box = T.$('error');
    if (!box) return;
    box.hidden = false;
    T.text(box, err instanceof Error ? err.message : String(err));
  };
  T.clearError = function () {
    const box = T.$('error');
    if (box) box.hidden = true;
  };

  function showLogin(message) {
    const login = T.$('login');
    T.$('main').hidden = true;
    login.hidden = false;
    T.text(T.$('login-error'), message || '');
    T.$('token').focus();
  }

  let renderPage = null;

  async function begin() {
    T.clearError();
    try {
      const who = await T.api('v1/whoami');
      if (who.scope === 'none') {
        showLogin('');
        return;
      }
      T.who = who;
      T.$('nav-admin').hidden = who.scope !== 'admin';
      T.text(T.$('who'), who.name ? who.name + ' (' + who.scope + ')' : 'anonymous reads');
      T.$('signout').hidden = !who.name;
      T.$('login').hidden = true;
      T.$('main').hidden = false;
      await renderPage(who);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) T.showError(err);
    }
  }

  // Every page calls this once with its render function (given the caller's identity).
  T.start = function (render) {
    renderPage = render;
    const page = document.body.dataset.page;
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.nav === page);
    if (T.report) {
      for (const id of ['login', 'topnav']) if (T.$(id)) T.$(id).hidden = true;
      T.$('main').hidden = false;
      Promise.resolve(render(null)).catch(T.showError);
      return;
    }
    T.$('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const input = T.$('token');
      const tok = input.value.trim();
      input.value = '';
      if (!tok) return;
      sessionStorage.setItem(TOKEN_KEY, tok);
      begin();
    });
    T.$('signout').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      T.$('signout').hidden = true;
      T.text(T.$('who'), '');
      showLogin('signed out');
    });
    begin();
  };

  // ---- charts ----
  T.dark = () => window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
  // A log axis labels its decades (and 2 and 5 within a span of few decades), not every minor tick.
  T.logTicks = function (fmt) {
    return function (v) {
      const x = Number(v);
      const m = x / Math.pow(10, Math.floor(Math.log10(x) + 1e-9));
      return Math.abs(m - 1) < 1e-6 || Math.abs(m - 2) < 1e-6 || Math.abs(m - 5) < 1e-6 ? fmt(x) : '';
    };
  };
  T.chart = function (canvasId, config) {
    if (T.charts[canvasId]) T.charts[canvasId].destroy();
    if (window.Chart && !T.chartThemed) {
      T.chartThemed = true;
      if (T.dark()) {
        window.Chart.defaults.color = '#c9d1d9';
        window.Chart.defaults.borderColor = '#30363d';
      }
    }
    config.options = Object.assign({animation: false, maintainAspectRatio: false, responsive: true}, config.options || {});
    const chart = new window.Chart(T.$(canvasId), config);
    T.charts[canvasId] = chart;
    if (T.chartTools) T.chartTools(chart, canvasId, config);  // chart_tools.js, where a page loads it
    return chart;
  };
  T.palette = ['#2f6fdf', '#e8772e', '#2a9d5c', '#c43d52', '#7b5cc4', '#8c6d3f', '#d35fb7', '#5f7a8a', '#a3a32b', '#1fa3b5'];
  T.statusColors = {
    ok: '#2a9d5c', estimated: '#7b5cc4', 'invalid-config': '#8c8c8c', 'compile-error': '#e8772e',
    timeout: '#c9a227', crash: '#c43d52', 'wrong-result': '#d35fb7',
  };
})();
