// Owns what a reader can do with a chart of x/y points (issue 51): zoom (the wheel, around the
// pointer) and pan (drag), back to the whole view (double-click or the reset button), and export
// of the view as it stands: PNG (the canvas) and CSV (the points inside the zoomed axes, with each
// point's record, config and provenance). A CSV cell a spreadsheet would run as a formula (a
// hostile knob value "=cmd()") is written with a leading quote, as OWASP's CSV-injection advice says.
'use strict';

(function () {
  const T = window.Tessera;
  const ZOOM = 1.25;  // one wheel notch

  const xyScales = (chart) => ['x', 'y'].map((id) => chart.scales[id])
    .filter((s) => s && (s.type === 'linear' || s.type === 'logarithmic'));

  function setRange(chart, id, lo, hi) {
    if (!(isFinite(lo) && isFinite(hi)) || lo === hi) return;
    const s = chart.options.scales[id] || (chart.options.scales[id] = {});
    s.min = Math.min(lo, hi);
    s.max = Math.max(lo, hi);
  }

  // The pointer's value stays where it is; the axis shrinks (zoom in) or grows around it. Pixels
  // map to values through the scale, so a log axis zooms in log space.
  function zoomAt(chart, px, py, factor) {
    for (const s of xyScales(chart)) {
      const p = s.isHorizontal() ? px : py;
      const a = s.isHorizontal() ? s.left : s.top, b = s.isHorizontal() ? s.right : s.bottom;
      setRange(chart, s.id, s.getValueForPixel(p - (p - a) * factor), s.getValueForPixel(p + (b - p) * factor));
    }
    chart.tesseraZoomed = true;
    chart.update('none');
  }

  function panBy(chart, dx, dy) {
    for (const s of xyScales(chart)) {
      const d = s.isHorizontal() ? dx : dy;
      const a = s.isHorizontal() ? s.left : s.top, b = s.isHorizontal() ? s.right : s.bottom;
      setRange(chart, s.id, s.getValueForPixel(a - d), s.getValueForPixel(b - d));
    }
    chart.tesseraZoomed = true;
    chart.update('none');
  }

  function reset(chart) {
    const orig = chart.tesseraRanges || {};
    for (const s of xyScales(chart)) {
      const o = chart.options.scales[s.id];
      if (!o) continue;
      o.min = orig[s.id] ? orig[s.id].min : undefined;
      o.max = orig[s.id] ? orig[s.id].max : undefined;
    }
    chart.tesseraZoomed = false;
    chart.update('none');
  }

  // The points of the view: every visible dataset's points inside the axes' current ranges.
  T.viewPoints = function (chart) {
    const sx = chart.scales.x, sy = chart.scales.y;
    const inside = (s, v) => !s || typeof v !== 'number' || (v >= s.min && v <= s.max);
    const rows = [];
    chart.data.datasets.forEach((d, i) => {
      if (!chart.isDatasetVisible(i)) return;
      d.data.forEach((p, j) => {
        const pt = p !== null && typeof p === 'object' ? p : {x: chart.data.labels ? chart.data.labels[j] : j, y: p};
        if (inside(sx, pt.x) && inside(sy, pt.y)) rows.push(Object.assign({series: d.label}, pt));
      });
    });
    return rows;
  };

  T.csvCell = function (v) {
    let s = v === null || v === undefined ? '' : typeof v === 'object' ? T.fmtConfig(v) : String(v);
    // A number (-1.5) or a lone dash is data; any other cell opening like a formula is quoted.
    if (/^[=+\-@\t\r]/.test(s) && !/^(-|[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?)$/i.test(s)) s = '\'' + s;
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  T.csv = (header, rows) => [header].concat(rows).map((r) => r.map(T.csvCell).join(',')).join('\r\n') + '\r\n';

  // A file the browser saves: an object URL of our own bytes (no server round trip, no data: URL).
  T.download = function (name, blob) {
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };

  const fileName = (canvasId, ext) => (document.title.split(' - ')[0] + ' ' + canvasId.replace(/^chart-/, ''))
    .replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 100) + '.' + ext;

  T.chartCsv = function (canvasId) {
    const chart = T.charts[canvasId];
    const rows = T.viewPoints(chart).map((p) => [p.series, p.x, p.y, p.id || '', p.status || '', p.config || '', p.writer === undefined ? '' : p.writer || '(local)',
      p.at ? T.fmtDate(p.at) : '']);
    const xt = chart.options.scales.x && chart.options.scales.x.title ? chart.options.scales.x.title.text : 'x';
    const yt = chart.options.scales.y && chart.options.scales.y.title ? chart.options.scales.y.title.text : 'y';
    return T.csv(['series', xt, yt, 'record', 'status', 'config', 'writer', 'when'], rows);
  };

  function toolbar(canvas, chart) {
    const box = canvas.parentNode;
    let bar = box.previousElementSibling;
    if (!bar || !bar.classList.contains('chart-tools') || bar.dataset.for !== canvas.id) {
      const zoomable = ['scatter', 'line'].includes(chart.config.type);
      bar = T.el('div', {class: 'chart-tools', dataset: {for: canvas.id}},
        zoomable ? T.el('span', {class: 'muted'}, 'wheel: zoom, drag: pan ') : null,
        zoomable ? T.el('button', {type: 'button', class: 'reset-zoom', on: {click: () => reset(T.charts[canvas.id])}}, 'whole view') : null,
        T.el('button', {type: 'button', class: 'export-png', on: {click: () => T.charts[canvas.id].canvas.toBlob((b) => T.download(fileName(canvas.id, 'png'), b), 'image/png')}}, 'PNG'),
        T.el('button', {type: 'button', class: 'export-csv', on: {click: () => T.download(fileName(canvas.id, 'csv'),
          new Blob([T.chartCsv(canvas.id)], {type: 'text/csv'}))}}, 'CSV'));
      box.parentNode.insertBefore(bar, box);
    }
  }

  function wire(canvas) {
    if (canvas.dataset.zoomWired) return;
    canvas.dataset.zoomWired = '1';
    const chartOf = () => T.charts[canvas.id];
    canvas.addEventListener('wheel', (ev) => {
      const c = chartOf();
      if (!c || !xyScales(c).length) return;
      ev.preventDefault();
      zoomAt(c, ev.offsetX, ev.offsetY, ev.deltaY < 0 ? 1 / ZOOM : ZOOM);
    }, {passive: false});
    let drag = null;
    canvas.addEventListener('pointerdown', (ev) => {
      if (ev.button === 0) drag = {x: ev.offsetX, y: ev.offsetY, moved: false};
    });
    canvas.addEventListener('pointermove', (ev) => {
      const c = chartOf();
      if (!drag || !c || !(ev.buttons & 1)) return;
      const dx = ev.offsetX - drag.x, dy = ev.offsetY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      panBy(c, dx, dy);
      drag.x = ev.offsetX;
      drag.y = ev.offsetY;
    });
    const end = () => (drag = null);
    canvas.addEventListener('pointerup', end);
    canvas.addEventListener('pointerleave', end);
    canvas.addEventListener('dblclick', () => chartOf() && reset(chartOf()));
  }

  // Called by T.chart for every chart it draws.
  T.chartTools = function (chart, canvasId, config) {
    const sc = (config.options && config.options.scales) || {};
    chart.tesseraRanges = {x: {min: sc.x && sc.x.min, max: sc.x && sc.x.max}, y: {min: sc.y && sc.y.min, max: sc.y && sc.y.max}};
    const canvas = T.$(canvasId);
    if (!canvas || !canvas.parentNode || !canvas.parentNode.parentNode) return;
    toolbar(canvas, chart);
    if (['scatter', 'line'].includes(config.type)) wire(canvas);
  };
})();
