// Owns the Workers and jobs page: the measurement workers (hardware, last heartbeat, what they
// hold leased) and the job queue (queued, leased and done items per job, throughput), refreshed
// every two seconds from GET /v1/workers and GET /v1/jobs. Throughput is measured here, from how
// many items were done between refreshes over the last minute.
'use strict';

(function () {
  const T = window.Tessera;
  const samples = [];  // [seconds, items done over the listed jobs]
  let timer = null;

  function shortId(id) {
    return id.slice(0, 8);
  }

  function renderWorkers(list, now) {
    const body = T.clear(document.querySelector('#workers tbody'));
    for (const w of list.workers) {
      body.appendChild(T.el('tr', {dataset: {id: w.id}},
        T.el('td', {title: w.id}, shortId(w.id)), T.el('td', {}, w.token), T.el('td', {}, w.target), T.el('td', {}, w.arch),
        T.el('td', {class: 'num'}, String(w.units)), T.el('td', {}, w.model + (w.device ? ' #' + w.device : '')), T.el('td', {}, w.host),
        T.el('td', {}, [w.tessera_version, w.llvm_version, w.toolkit_version || '-'].join(' / ')),
        T.el('td', {class: 'num'}, String(w.slots)), T.el('td', {class: 'num', dataset: {col: 'leased'}}, String(w.leased)),
        T.el('td', {dataset: {col: 'seen', value: w.last_seen}}, T.ago(w.last_seen, now)),
        T.el('td', {}, w.live ? T.tag('live') : T.tag('gone', 'not heard from within the worker TTL'))));
    }
    if (!list.workers.length) body.appendChild(T.el('tr', {}, T.el('td', {colspan: 12}, 'no workers')));
  }

  function renderJobs(data) {
    const body = T.clear(document.querySelector('#jobs tbody'));
    for (const j of data.jobs) {
      const end = j.finished_at > 0 ? j.finished_at : data.now;
      const minutes = Math.max(end - j.created_at, 1) / 60;
      const bar = T.el('progress', {max: String(Math.max(j.items, 1)), value: String(j.done)});
      body.appendChild(T.el('tr', {dataset: {id: j.id, state: j.state}},
        T.el('td', {title: j.id}, shortId(j.id)), T.el('td', {}, j.submitter), T.el('td', {}, j.kind),
        T.el('td', {}, T.el('a', {href: 'kernel.html?key=' + j.key_id}, T.kernelName(j.key))), T.el('td', {}, j.key.target),
        T.el('td', {}, T.tag(j.state)),
        T.el('td', {class: 'num', dataset: {col: 'queued'}}, String(j.queued)),
        T.el('td', {class: 'num', dataset: {col: 'leased'}}, String(j.leased)),
        T.el('td', {class: 'num', dataset: {col: 'done'}}, String(j.done)),
        T.el('td', {class: 'num', dataset: {col: 'items'}}, String(j.items)), T.el('td', {}, bar),
        T.el('td', {class: 'num'}, (j.done / minutes).toFixed(1)),
        T.el('td', {}, j.holders.map(shortId).join(', ')), T.el('td', {}, T.ago(j.created_at, data.now))));
    }
    if (!data.jobs.length) body.appendChild(T.el('tr', {}, T.el('td', {colspan: 14}, 'no jobs to show')));
    T.text(T.$('jobs-scope'), data.scope === 'all' ? 'every submitter\'s jobs (admin)' : 'your jobs; the totals count everyone\'s');
  }

  function renderTotals(data) {
    const done = data.jobs.reduce((s, j) => s + j.done, 0);
    samples.push([data.now, done]);
    while (samples.length > 2 && samples[0][0] < data.now - 60) samples.shift();
    const [t0, d0] = samples[0];
    const rate = data.now - t0 >= 4 ? ((done - d0) / (data.now - t0)) * 60 : null;
    const t = data.totals;
    const box = T.clear(T.$('totals'));
    const card = (title, value, id) => T.el('div', {class: 'card', id: id}, T.el('div', {class: 'card-title'}, title),
      T.el('div', {class: 'card-value'}, value));
    box.appendChild(card('open jobs', String(t.open_jobs), 'total-open'));
    box.appendChild(card('queued items', String(t.queued), 'total-queued'));
    box.appendChild(card('leased items', String(t.leased), 'total-leased'));
    box.appendChild(card('done items (open jobs)', String(t.done), 'total-done'));
    box.appendChild(card('throughput, last minute', rate === null ? 'measuring ...' : rate.toFixed(1) + ' items/min', 'total-rate'));
  }

  async function refresh() {
    try {
      const all = T.$('all-workers').checked ? '?all=1' : '';
      const [workers, jobs] = await Promise.all([T.api('v1/workers' + all), T.api('v1/jobs')]);
      T.clearError();
      renderWorkers(workers, jobs.now);
      renderJobs(jobs);
      renderTotals(jobs);
      T.text(T.$('updated'), 'updated ' + T.fmtDate(jobs.now));
      T.$('updated').dataset.at = String(jobs.now);
    } catch (err) {
      if (err instanceof T.ApiError && err.status === 401) stop();
      else T.showError(err);
    }
  }

  function stop() {
    clearInterval(timer);
    timer = null;
  }

  function schedule() {
    stop();
    if (T.$('auto').checked) timer = setInterval(refresh, 2000);
  }

  let wired = false;
  T.start(function () {
    if (!wired) {
      wired = true;
      T.$('auto').addEventListener('change', schedule);
      T.$('all-workers').addEventListener('change', refresh);
    }
    schedule();
    return refresh();
  });
})();
