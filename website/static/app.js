// GPUlayer UI behaviour, plain JavaScript (no build, no framework).
//  - Live updates: the page subscribes to /v1/event/stream from the Raft
//    index it was rendered at, for the topics it shows; on each batch it
//    re-fetches itself and swaps every [data-live] section by id.
//  - Logs: <pre data-log-alloc> elements follow a task's log through
//    /v1/client/fs/logs/... with follow=true; text is only ever added with
//    text nodes, so task output can never become markup.
//  - Actions: stop/purge a job, restart an allocation, plan and run HCL.
//  - Token: kept in localStorage and sent as X-Gpulayer-Token; also in the
//    gpulayer-token cookie (path /ui) so page loads carry it.
(function () {
  'use strict';

  var TOKEN_KEY = 'gpulayer-token';

  function token() {
    try { return localStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }

  function headers(extra) {
    var h = {};
    if (extra) { for (var k in extra) { h[k] = extra[k]; } }
    var t = token();
    if (t) { h['X-Gpulayer-Token'] = t; }
    return h;
  }

  // setTokenCookie stores the token for page loads (GET /ui/...), which
  // cannot send a header; the API routes never read the cookie.
  function setTokenCookie(secret) {
    var attrs = '; path=/ui; SameSite=Strict' + (location.protocol === 'https:' ? '; Secure' : '');
    if (secret) {
      document.cookie = TOKEN_KEY + '=' + encodeURIComponent(secret) + attrs;
    } else {
      document.cookie = TOKEN_KEY + '=' + attrs + '; max-age=0';
    }
  }

  function flash(msg, bad) {
    var el = document.getElementById('flash');
    if (!el) { return; }
    el.textContent = msg;
    el.className = bad ? 'bad' : '';
    el.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(function () { el.hidden = true; }, 5000);
  }

  function showToken() {
    var d = document.getElementById('token-dialog');
    if (d) { d.hidden = false; document.getElementById('token-input').focus(); }
  }

  // api calls the HTTP API and resolves to the decoded JSON body; a non-2xx
  // answer rejects with an Error carrying .status and the API's message.
  function api(method, path, body) {
    var opts = { method: method, headers: headers(body === undefined ? null : { 'Content-Type': 'application/json' }) };
    if (body !== undefined) { opts.body = JSON.stringify(body); }
    return fetch(path, opts).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = text; }
        if (resp.status === 403) { showToken(); }
        if (!resp.ok) {
          var msg = (data && data.error) ? data.error : (typeof data === 'string' && data ? data : resp.status + ' ' + resp.statusText);
          var err = new Error(msg);
          err.status = resp.status;
          throw err;
        }
        return data;
      });
    });
  }

  // ---- live refresh -------------------------------------------------------

  var refreshTimer = null;
  var refreshing = false;

  function scheduleRefresh() {
    if (refreshTimer) { return; }
    refreshTimer = setTimeout(function () { refreshTimer = null; refresh(); }, 150);
  }

  function refresh() {
    if (refreshing) { scheduleRefresh(); return; }
    refreshing = true;
    fetch(location.pathname + location.search, { headers: headers({ 'X-Gpulayer-Partial': '1' }) })
      .then(function (resp) { return resp.text().then(function (t) { return { ok: resp.ok, text: t }; }); })
      .then(function (r) {
        var doc = new DOMParser().parseFromString(r.text, 'text/html');
        var fresh = doc.querySelectorAll('[data-live]');
        for (var i = 0; i < fresh.length; i++) {
          var cur = document.getElementById(fresh[i].id);
          if (cur) { cur.replaceWith(document.importNode(fresh[i], true)); }
        }
        document.body.dispatchEvent(new CustomEvent('gpulayer:refreshed'));
      })
      .catch(function () { /* the next event or retry refreshes again */ })
      .then(function () { refreshing = false; });
  }

  function setLive(on, text) {
    var el = document.getElementById('live-status');
    if (!el) { return; }
    el.classList.toggle('off', !on);
    el.textContent = text;
  }

  // readLines streams a fetch body and calls onLine for each complete line.
  function readLines(resp, onLine) {
    var reader = resp.body.getReader();
    var dec = new TextDecoder();
    var buf = '';
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) { return; }
        buf += dec.decode(r.value, { stream: true });
        var nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          var line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim()) { onLine(line); }
        }
        return pump();
      });
    }
    return pump();
  }

  function streamEvents() {
    var topics = (document.body.dataset.streamTopics || '').split(',').filter(Boolean);
    if (!topics.length) { return; }
    var index = document.body.dataset.streamIndex || '0';
    var failures = 0;
    function connect() {
      var q = 'index=' + encodeURIComponent(index) + topics.map(function (t) { return '&topic=' + encodeURIComponent(t); }).join('');
      fetch('/v1/event/stream?' + q, { headers: headers() }).then(function (resp) {
        if (resp.status === 410) {
          // Too far behind: re-read the page and stream from now.
          index = '0';
          refresh();
          throw new Error('event stream restarted');
        }
        if (!resp.ok) { throw new Error('event stream: ' + resp.status); }
        failures = 0;
        setLive(true, 'live updates');
        return readLines(resp, function (line) {
          var msg;
          try { msg = JSON.parse(line); } catch (e) { return; }
          if (msg.Index) {
            index = String(msg.Index);
            scheduleRefresh();
          } else if (msg.Error) {
            index = '0';
            refresh();
          }
        });
      }).catch(function () { failures++; }).then(function () {
        setLive(false, 'reconnecting…');
        setTimeout(connect, Math.min(500 * Math.pow(2, failures), 10000));
      });
    }
    connect();
  }

  // ---- logs ---------------------------------------------------------------

  function followLog(pre) {
    if (pre.abort) { pre.abort.abort(); }
    var ctl = new AbortController();
    pre.abort = ctl;
    pre.textContent = '';
    var url = '/v1/client/fs/logs/' + encodeURIComponent(pre.dataset.logAlloc) +
      '?task=' + encodeURIComponent(pre.dataset.logTask) + '&type=' + encodeURIComponent(pre.dataset.logType) +
      '&follow=true&plain=true';
    var attempt = 0;
    function open() {
      fetch(url, { headers: headers(), signal: ctl.signal }).then(function (resp) {
        if (!resp.ok) {
          return resp.text().then(function (t) { throw new Error(t); });
        }
        var reader = resp.body.getReader();
        var dec = new TextDecoder();
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) { return; }
            var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
            pre.appendChild(document.createTextNode(dec.decode(r.value, { stream: true })));
            if (atBottom) { pre.scrollTop = pre.scrollHeight; }
            return pump();
          });
        }
        return pump();
      }).catch(function (e) {
        if (ctl.signal.aborted) { return; }
        // The task may not have started yet: retry a few times.
        if (attempt++ < 20) { setTimeout(function () { pre.textContent = ''; open(); }, 1000); return; }
        pre.appendChild(document.createTextNode('\n[log unavailable: ' + e.message + ']'));
      });
    }
    open();
  }

  // openLog starts a log pane. A pane with data-log-prefer (a failed task
  // on another agent's node, whose logs the page could not read) first
  // reads that stream once and opens on it when it holds anything: the
  // error is usually there.
  function openLog(pre) {
    var prefer = pre.dataset.logPrefer;
    if (!prefer || prefer === pre.dataset.logType) { followLog(pre); return; }
    var url = '/v1/client/fs/logs/' + encodeURIComponent(pre.dataset.logAlloc) +
      '?task=' + encodeURIComponent(pre.dataset.logTask) + '&type=' + encodeURIComponent(prefer) + '&plain=true';
    fetch(url, { headers: headers() }).then(function (resp) {
      return resp.ok ? resp.text() : '';
    }).catch(function () { return ''; }).then(function (text) {
      if (text.length > 0) {
        pre.dataset.logType = prefer;
        pre.parentNode.querySelectorAll('[data-action="log-type"]').forEach(function (b) {
          b.setAttribute('aria-pressed', String(b.dataset.type === prefer));
        });
      }
      followLog(pre);
    });
  }

  // ---- telemetry of other nodes ----------------------------------------------

  // fillRemoteStats reads the telemetry of nodes that are not this agent's
  // client (the agent proxies /v1/client/stats?node_id= to them) into the
  // rows of [data-stats-node] boxes.
  function fillRemoteStats() {
    document.querySelectorAll('[data-stats-node]').forEach(function (box) {
      api('GET', '/v1/client/stats?node_id=' + encodeURIComponent(box.dataset.statsNode)).then(function (st) {
        if (!st || !st.SampledAt) { return; }
        (st.Devices || []).forEach(function (d) {
          var row = null;
          box.querySelectorAll('tr[data-gpu]').forEach(function (r) { if (r.dataset.gpu === d.ID) { row = r; } });
          if (!row || d.Error) { return; }
          var u = row.querySelector('.util');
          if (u) {
            var meter = el('span', null, 'meter');
            var fill = el('span', null, 'meter-fill');
            fill.style.width = Math.max(0, Math.min(100, d.UtilizationPercent)) + '%';
            meter.title = d.UtilizationPercent.toFixed(1) + ' %';
            meter.appendChild(fill);
            u.textContent = '';
            u.appendChild(meter);
            u.appendChild(document.createTextNode(' ' + Math.round(d.UtilizationPercent) + ' %'));
          }
          var m = row.querySelector('.mem');
          if (m) { m.textContent = d.MemoryUsedMiB + (m.dataset.total ? ' / ' + d.MemoryTotalMiB : '') + ' MiB'; }
        });
        var at = box.querySelector('.telemetry-at');
        if (at) {
          var ago = Math.max(0, Math.round((Date.now() - st.SampledAt / 1e6) / 1000));
          at.textContent = ' · GPU telemetry sampled ' + ago + 's ago (from the node)';
        }
      }).catch(function () { /* the node may be down: leave the dashes */ });
    });
  }

  // ---- actions ------------------------------------------------------------

  function stopJob(id, purge) {
    var what = purge ? 'Stop and purge job ' + id + '?' : 'Stop job ' + id + '?';
    if (!window.confirm(what)) { return; }
    api('DELETE', '/v1/job/' + encodeURIComponent(id) + (purge ? '?purge=true' : ''))
      .then(function () {
        flash('Job ' + id + (purge ? ' stopped and purged' : ' stopped'));
        if (purge) { location.href = '/ui/jobs'; } else { scheduleRefresh(); }
      })
      .catch(function (e) { flash('Stop failed: ' + e.message, true); });
  }

  // Job versions and deployments.
  function deploymentAction(what, id) {
    var path = { promote: '/v1/deployment/promote/', fail: '/v1/deployment/fail/' }[what];
    var body = what === 'promote' ? { DeploymentID: id, All: true } : { DeploymentID: id };
    if (what === 'fail' && !window.confirm('Fail deployment ' + id.slice(0, 8) + '?')) { return; }
    api('PUT', path + encodeURIComponent(id), body)
      .then(function () { flash('Deployment ' + id.slice(0, 8) + (what === 'promote' ? ' promoted' : ' failed')); scheduleRefresh(); })
      .catch(function (e) { flash('Deployment ' + what + ' failed: ' + e.message, true); });
  }

  function revertJob(id, version) {
    if (!window.confirm('Revert job ' + id + ' to version ' + version + '?')) { return; }
    api('PUT', '/v1/job/' + encodeURIComponent(id) + '/revert', { JobID: id, JobVersion: Number(version) })
      .then(function () { flash('Job ' + id + ' reverted to version ' + version); scheduleRefresh(); })
      .catch(function (e) { flash('Revert failed: ' + e.message, true); });
  }

  function restartAlloc(id, method, path) {
    api(method || 'PUT', (path || '/v1/allocation/{id}/restart').replace('{id}', encodeURIComponent(id)), {})
      .then(function () { flash('Restarting allocation ' + id.slice(0, 8)); scheduleRefresh(); })
      .catch(function (e) { flash('Restart failed: ' + e.message, true); });
  }

  // ---- run page -----------------------------------------------------------

  var planned = null;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }

  function jobSummary(job) {
    var box = el('div');
    var dl = el('dl', null, 'facts');
    [['Job', job.ID], ['Name', job.Name], ['Type', job.Type], ['Priority', job.Priority], ['Datacenters', (job.Datacenters || []).join(', ')]].forEach(function (kv) {
      var d = el('div');
      d.appendChild(el('dt', kv[0]));
      d.appendChild(el('dd', kv[1] === undefined ? '' : kv[1]));
      dl.appendChild(d);
    });
    box.appendChild(dl);
    (job.TaskGroups || []).forEach(function (g) {
      var p = el('p');
      p.appendChild(el('strong', 'Group ' + g.Name));
      var tasks = (g.Tasks || []).map(function (t) {
        var r = t.Resources || {};
        var devs = (r.Devices || []).map(function (d) { return (d.Count || 1) + '× ' + d.Name; }).join(', ');
        return t.Name + ' (' + t.Driver + ', ' + (r.CPU || 0) + ' MHz, ' + (r.MemoryMB || 0) + ' MiB' + (devs ? ', ' + devs : '') + ')';
      }).join('; ');
      p.appendChild(document.createTextNode(' × ' + (g.Count === undefined ? 1 : g.Count) + ': ' + tasks));
      box.appendChild(p);
    });
    return box;
  }

  function failureText(m) {
    if (!m) { return ''; }
    if (m.Explanation) { return m.Explanation; }
    var parts = [];
    [m.ConstraintFiltered || {}, m.DimensionExhausted || {}].forEach(function (mm) {
      Object.keys(mm).forEach(function (k) { parts.push(k + ': ' + mm[k] + ' nodes'); });
    });
    return (m.NodesEvaluated || 0) + ' nodes evaluated, ' + (m.NodesFiltered || 0) + ' filtered, ' +
      (m.NodesExhausted || 0) + ' exhausted' + (parts.length ? ' (' + parts.join('; ') + ')' : '');
  }

  // planView renders GPUlayer's plan response (Groups, DiffLines, Preemptions)
  // or a Nomad-shaped one (Annotations, FailedTGAllocs), as text only.
  function planView(plan) {
    var box = el('div');
    if (plan.Groups) {
      plan.Groups.forEach(function (g) {
        var nodes = Object.keys(g.Nodes || {}).sort().map(function (n) { return n + ' ×' + g.Nodes[n]; }).join(', ');
        var p = el('p');
        p.appendChild(el('strong', 'Group ' + g.Name));
        p.appendChild(document.createTextNode(': place ' + (g.Place || 0) + (nodes ? ' (' + nodes + ')' : '') +
          ', stop ' + (g.Stop || 0) + ', update in place ' + (g.InPlace || 0) + ', queued ' + (g.Queued || 0)));
        box.appendChild(p);
        if (g.Failure) {
          box.appendChild(el('p', 'Would wait: ' + failureText(g.Failure), 'failure'));
        }
      });
      if (plan.Preemptions && plan.Preemptions.length) {
        box.appendChild(el('p', 'Would preempt: ' + plan.Preemptions.join(', '), 'reason'));
      }
      if (!plan.JobModifyIndex) {
        box.appendChild(el('p', 'A new job: nothing runs under this ID yet.', 'muted'));
      } else if (plan.DiffLines && plan.DiffLines.length) {
        box.appendChild(el('h3', 'Changes against the running version'));
        box.appendChild(el('pre', plan.DiffLines.join('\n')));
      }
    } else {
      var d = (plan.Annotations && plan.Annotations.DesiredTGUpdates) || {};
      Object.keys(d).forEach(function (g) {
        var u = d[g];
        var parts = Object.keys(u).filter(function (k) { return u[k]; }).map(function (k) { return u[k] + ' ' + k.toLowerCase(); });
        box.appendChild(el('p', 'Group ' + g + ': ' + (parts.join(', ') || 'no change')));
      });
      var failed = plan.FailedTGAllocs || {};
      Object.keys(failed).forEach(function (g) {
        box.appendChild(el('p', 'Group ' + g + ' would not be placed: ' + failureText(failed[g]), 'failure'));
      });
    }
    var details = el('details');
    details.appendChild(el('summary', 'Full plan response'));
    details.appendChild(el('pre', JSON.stringify(plan, null, 2)));
    box.appendChild(details);
    return box;
  }

  function showPlan(title, note, body, isError) {
    document.getElementById('plan-output').hidden = false;
    document.getElementById('plan-title').textContent = title;
    document.getElementById('plan-note').textContent = note || '';
    var b = document.getElementById('plan-body');
    b.textContent = '';
    if (isError) { b.appendChild(el('pre', body, 'error')); } else { b.appendChild(body); }
  }

  function doPlan() {
    var hcl = document.getElementById('hcl').value;
    var runBtn = document.getElementById('run-button');
    runBtn.disabled = true;
    planned = null;
    api('POST', '/v1/jobs/parse', { JobHCL: hcl, Filename: 'job.hcl' }).then(function (job) {
      planned = job;
      return api('PUT', '/v1/job/' + encodeURIComponent(job.ID) + '/plan', { Job: job, Diff: true })
        .then(function (plan) {
          showPlan('Plan for ' + job.ID, 'What the scheduler would do now (nothing has been submitted).', planView(plan));
        }, function (e) {
          if (e.status === 404 || e.status === 405 || e.status === 501) {
            var box = jobSummary(job);
            showPlan('Parsed job ' + job.ID, 'This server has no plan endpoint yet: showing the parsed job instead of a placement plan.', box);
            return;
          }
          throw e;
        });
    }).then(function () {
      if (planned) { runBtn.disabled = false; }
    }).catch(function (e) {
      showPlan('Cannot plan this job', '', e.message, true);
    });
  }

  function doRun() {
    if (!planned) { return; }
    var id = planned.ID;
    document.getElementById('run-button').disabled = true;
    api('PUT', '/v1/jobs', { Job: planned }).then(function (resp) {
      flash('Submitted ' + id + ' (evaluation ' + String(resp.EvalID || '').slice(0, 8) + ')');
      location.href = '/ui/job/' + encodeURIComponent(id);
    }).catch(function (e) {
      document.getElementById('run-button').disabled = false;
      showPlan('Submit failed', '', e.message, true);
    });
  }

  // downloadArtifact fetches a blob route with the token header (API
  // routes never read the cookie) and saves it under name.
  function downloadArtifact(href, name) {
    fetch(href, { headers: headers() }).then(function (resp) {
      if (resp.status === 403) { showToken(); }
      if (!resp.ok) { throw new Error(resp.status + ' ' + resp.statusText); }
      return resp.blob();
    }).then(function (b) {
      var a = document.createElement('a');
      a.href = URL.createObjectURL(b);
      a.download = name || 'artifact';
      document.body.appendChild(a);
      a.click();
      setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
    }).catch(function (e) { flash('Download failed: ' + e.message, true); });
  }

  // ---- wiring ---------------------------------------------------------------

  document.addEventListener('click', function (ev) {
    var t = ev.target.closest('[data-action]');
    if (!t || t.tagName === 'FORM') { return; }
    switch (t.dataset.action) {
      case 'stop-job': stopJob(t.dataset.job, false); break;
      case 'purge-job': stopJob(t.dataset.job, true); break;
      case 'restart-alloc': restartAlloc(t.dataset.alloc, t.dataset.method, t.dataset.path); break;
      case 'promote-deployment': deploymentAction('promote', t.dataset.deployment); break;
      case 'fail-deployment': deploymentAction('fail', t.dataset.deployment); break;
      case 'revert-job': revertJob(t.dataset.job, t.dataset.version); break;
      case 'run': doRun(); break;
      case 'token':
        var d = document.getElementById('token-dialog');
        d.hidden = !d.hidden;
        break;
      case 'clear-token':
        try { localStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ }
        setTokenCookie('');
        document.getElementById('token-input').value = '';
        flash('Token cleared');
        break;
      case 'download-artifact':
        downloadArtifact(t.dataset.digest, t.dataset.name);
        break;
      case 'log-type':
        var pre = document.getElementById(t.dataset.target);
        pre.dataset.logType = t.dataset.type;
        t.parentNode.querySelectorAll('[data-action="log-type"]').forEach(function (b) { b.setAttribute('aria-pressed', String(b === t)); });
        followLog(pre);
        break;
      default: return;
    }
    ev.preventDefault();
  });

  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (f.dataset.action === 'plan') { ev.preventDefault(); doPlan(); }
    if (f.dataset.action === 'save-token') {
      ev.preventDefault();
      var secret = document.getElementById('token-input').value;
      try { localStorage.setItem(TOKEN_KEY, secret); } catch (e) { /* private mode */ }
      setTokenCookie(secret);
      if (document.body.dataset.login) { location.reload(); return; }
      document.getElementById('token-dialog').hidden = true;
      flash('Token saved');
    }
  });

  document.addEventListener('DOMContentLoaded', function () {
    var file = document.getElementById('hcl-file');
    if (file) {
      file.addEventListener('change', function () {
        if (!file.files.length) { return; }
        file.files[0].text().then(function (t) {
          document.getElementById('hcl').value = t;
          document.getElementById('run-button').disabled = true;
        });
      });
      document.getElementById('hcl').addEventListener('input', function () { document.getElementById('run-button').disabled = true; });
    }
    document.querySelectorAll('pre[data-log-alloc]').forEach(openLog);
    streamEvents();
    fillRemoteStats();
    document.body.addEventListener('gpulayer:refreshed', fillRemoteStats);
    var poll = parseInt(document.body.dataset.poll || '0', 10);
    if (poll > 0) { setInterval(scheduleRefresh, Math.max(poll, 1000)); }
  });
})();
