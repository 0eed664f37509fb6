// Owns the Admin page (admin tokens only; the service refuses the routes to any other): the
// tokens (scope, when last used and last written with, revoke), the quarantined records (release,
// delete) and the audit trail of writes, newest first. Every action is a POST that takes a second
// click to confirm; nothing changes on a GET.
'use strict';

(function () {
  const T = window.Tessera;
  let auditBefore = 0;

  // A button that asks once more before it acts.
  function confirmButton(label, confirmLabel, action) {
    const b = T.el('button', {type: 'button', class: 'action', dataset: {action: label}}, label);
    b.addEventListener('click', async () => {
      if (b.dataset.armed !== '1') {
        b.dataset.armed = '1';
        b.classList.add('danger');
        T.text(b, confirmLabel);
        return;
      }
      b.disabled = true;
      try {
        await action();
      } catch (err) {
        T.showError(err);
      }
    });
    return b;
  }

  async function loadTokens() {
    const data = await T.api('v1/admin/tokens');
    const body = T.clear(document.querySelector('#tokens tbody'));
    for (const t of data.tokens) {
      const active = !t.revoked_at;
      body.appendChild(T.el('tr', {dataset: {name: t.name, scope: t.scope}},
        T.el('td', {}, t.name), T.el('td', {}, t.scope), T.el('td', {}, t.created_at), T.el('td', {}, t.revoked_at || '-'),
        T.el('td', {}, t.last_used || '-'), T.el('td', {}, t.last_write || '-'), T.el('td', {class: 'mono'}, t.hash_prefix),
        T.el('td', {}, active ? confirmButton('revoke', 'confirm revoke', async () => {
          await T.api('v1/admin/tokens/revoke', {method: 'POST', body: {name: t.name}});
          if (T.who && T.who.name === t.name) {
            sessionStorage.removeItem('tessera.token');
            location.reload();
            return;
          }
          await loadTokens();
        }) : null)));
    }
  }

  function kernelCell(r) {
    return T.el('td', {}, T.el('a', {href: 'kernel.html?key=' + r.key_id}, T.kernelName(r.key)));
  }

  async function loadQuarantined() {
    const data = await T.api('v1/admin/records?quarantined=1&limit=200');
    const body = T.clear(document.querySelector('#quarantined tbody'));
    for (const r of data.records) {
      const act = (what) => async () => {
        await T.api('v1/admin/records/' + what, {method: 'POST', body: {ids: [r.id]}});
        await Promise.all([loadQuarantined(), loadAudit(true)]);
      };
      body.appendChild(T.el('tr', {dataset: {id: r.id}},
        T.el('td', {}, String(r.id)), kernelCell(r), T.el('td', {}, r.key.target), T.el('td', {}, r.status),
        T.el('td', {class: 'num'}, r.status === 'ok' ? T.fmtTime(r.result.median_us) : '-'), T.el('td', {}, r.writer || '-'),
        T.el('td', {}, r.received_at || '-'), T.el('td', {class: 'mono'}, JSON.stringify(r.config)),
        T.el('td', {}, confirmButton('release', 'confirm release', act('release')), ' ',
          confirmButton('delete', 'confirm delete', act('delete')))));
    }
    if (!data.records.length) body.appendChild(T.el('tr', {}, T.el('td', {colspan: 9}, 'no quarantined records')));
  }

  async function loadAudit(fresh) {
    if (fresh) auditBefore = 0;
    const p = new URLSearchParams({limit: '50'});
    const writer = T.$('audit-writer').value.trim();
    if (writer) p.set('writer', writer);
    if (auditBefore) p.set('before', String(auditBefore));
    const data = await T.api('v1/admin/audit?' + p.toString());
    const body = document.querySelector('#audit tbody');
    if (fresh) T.clear(body);
    for (const r of data.records) {
      const pv = r.provenance;
      body.appendChild(T.el('tr', {dataset: {id: r.id}},
        T.el('td', {}, String(r.id)), T.el('td', {}, r.received_at || '-'), T.el('td', {}, r.writer || '(local)'), kernelCell(r),
        T.el('td', {}, r.key.target), T.el('td', {}, r.status),
        T.el('td', {class: 'num'}, r.status === 'ok' || r.status === 'estimated' ? T.fmtTime(r.result.median_us) : '-'),
        T.el('td', {}, [pv.host, pv.user, pv.cpu_model].filter(Boolean).join(', ')),
        T.el('td', {}, r.quarantined ? T.tag('quarantined') : '', T.trustTag(r))));
    }
    auditBefore = data.next_before || 0;
    T.$('audit-older').disabled = !data.next_before;
  }

  let wired = false;
  T.start(async function (who) {
    if (!who || who.scope !== 'admin') {
      // Nothing is asked of the admin routes with another token: the page stays empty.
      T.$('admin-denied').hidden = false;
      T.$('admin-body').hidden = true;
      return;
    }
    T.$('admin-denied').hidden = true;
    T.$('admin-body').hidden = false;
    if (!wired) {
      wired = true;
      T.$('audit-form').addEventListener('submit', (ev) => {
        ev.preventDefault();
        loadAudit(true).catch(T.showError);
      });
      T.$('audit-older').addEventListener('click', () => loadAudit(false).catch(T.showError));
    }
    await Promise.all([loadTokens(), loadQuarantined(), loadAudit(true)]);
  });
})();
