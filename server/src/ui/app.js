/*
 * Strata's graph page: a form over /api/query.
 *
 * The query lives in the page URL in OpenTSDB's GET form (start=, end=, one m= per metric, the
 * same syntax as /api/query's GET form), so a link shares it and opening one draws it. The page
 * runs the equivalent JSON body with POST /api/query, shows that body and a curl command, and
 * draws the result with uPlot. For automated checks, #chart gets a data-points attribute (the
 * number of points drawn, summed over the series) once the chart is drawn; it is removed while a
 * query runs and when one fails.
 */
'use strict';

(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

  // Used when /api/aggregators cannot be read: the ones every OpenTSDB 2.x has.
  const FALLBACK_AGGREGATORS = ['avg', 'count', 'dev', 'first', 'last', 'max', 'mimmax', 'mimmin',
    'min', 'none', 'sum', 'zimsum'];
  const FILLS = ['none', 'nan', 'null', 'zero'];
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
    '#7f7f7f', '#bcbd22', '#17becf'];
  const CHART_HEIGHT = 400;
  const SUGGEST_MAX = 100;
  const SUGGEST_DELAY_MS = 150;

  let aggregators = FALLBACK_AGGREGATORS;
  let plot = null;
  // Bumped by each run, so the answer of a query that was superseded is dropped.
  let runSeq = 0;

  // ---------------------------------------------------------------------------------------------
  // The query model and OpenTSDB's m= syntax:
  // <aggregator>[:<interval>-<function>[-<fill>]][:rate[{counter[,max[,reset]]}]][:explicit_tags]
  //   :<metric>[{<group-by tags>}][{<other tags>}]

  function emptyQuery() {
    return {
      aggregator: 'sum', metric: '', tags: [], downsample: null, rate: null,
      explicitTags: false, percentiles: null,
    };
  }

  function parseM(spec) {
    const parts = spec.split(':');
    if (parts.length < 2) {
      throw new Error(`m=${spec}: expected <aggregator>:<metric>`);
    }
    const q = emptyQuery();
    q.aggregator = parts[0];
    for (const part of parts.slice(1, -1)) {
      const lower = part.toLowerCase();
      if (lower.startsWith('rate')) {
        q.rate = parseRate(part);
      } else if (/^\d/.test(part)) {
        const [interval, fn = 'avg', fill = 'none'] = part.split('-');
        q.downsample = { interval, fn, fill };
      } else if (lower === 'explicit_tags') {
        q.explicitTags = true;
      } else if (lower.startsWith('percentiles')) {
        q.percentiles = lower.slice('percentiles'.length).replace(/^\[|\]$/g, '')
          .split(',').map((p) => p.trim()).filter((p) => p !== '').map(Number);
      }
    }
    parseMetric(parts[parts.length - 1], q);
    return q;
  }

  function parseRate(part) {
    const rate = { counter: false, max: '', reset: '', drop: false };
    const open = part.indexOf('{');
    if (open < 0) return rate;
    const [kind = '', max = '', reset = ''] = part.slice(open + 1).replace(/}$/, '').split(',');
    rate.counter = kind.endsWith('counter');
    rate.drop = kind === 'dropcounter';
    rate.max = max;
    rate.reset = reset;
    return rate;
  }

  function parseMetric(text, q) {
    const open = text.indexOf('{');
    q.metric = open < 0 ? text : text.slice(0, open);
    let rest = open < 0 ? '' : text.slice(open);
    for (const groupBy of [true, false]) {
      if (!rest.startsWith('{')) break;
      const close = rest.indexOf('}');
      if (close < 0) throw new Error(`Missing '}' at the end of: ${text}`);
      for (const pair of rest.slice(1, close).split(',')) {
        if (pair === '') continue;
        const eq = pair.indexOf('=');
        q.tags.push({
          key: eq < 0 ? pair : pair.slice(0, eq),
          value: eq < 0 ? '' : pair.slice(eq + 1),
          groupBy,
        });
      }
      rest = rest.slice(close + 1);
    }
  }

  function formatDownsample(ds) {
    return `${ds.interval}-${ds.fn}${ds.fill && ds.fill !== 'none' ? `-${ds.fill}` : ''}`;
  }

  function formatRate(rate) {
    if (!rate.counter && !rate.drop) return 'rate';
    const opts = [rate.drop ? 'dropcounter' : 'counter'];
    if (rate.max !== '' || rate.reset !== '') opts.push(rate.max);
    if (rate.reset !== '') opts.push(rate.reset);
    return `rate{${opts.join(',')}}`;
  }

  function formatTags(tags) {
    const group = tags.filter((t) => t.groupBy).map((t) => `${t.key}=${t.value}`);
    const other = tags.filter((t) => !t.groupBy).map((t) => `${t.key}=${t.value}`);
    if (other.length) return `{${group.join(',')}}{${other.join(',')}}`;
    return group.length ? `{${group.join(',')}}` : '';
  }

  function formatM(q) {
    const parts = [q.aggregator];
    if (q.downsample) parts.push(formatDownsample(q.downsample));
    if (q.rate) parts.push(formatRate(q.rate));
    if (q.explicitTags) parts.push('explicit_tags');
    if (q.percentiles) parts.push(`percentiles[${q.percentiles.join(',')}]`);
    parts.push(q.metric + formatTags(q.tags));
    return parts.join(':');
  }

  // A tag as /api/query's JSON filter, the way the server reads `k=v` in m= (OpenTSDB's rules):
  // `*` any value, `type(filter)` that filter, a value with `*` a case-insensitive wildcard,
  // anything else literal values separated by `|`.
  function tagFilter(tag) {
    const v = tag.value;
    let type = 'literal_or';
    let filter = v;
    const open = v.indexOf('(');
    if (v === '*') {
      type = 'wildcard';
    } else if (open >= 0 && v.endsWith(')')) {
      type = v.slice(0, open).toLowerCase();
      filter = v.slice(open + 1, -1);
    } else if (open >= 0) {
      type = v;
      filter = '';
    } else if (v.includes('*')) {
      type = 'iwildcard';
    }
    return { type, tagk: tag.key, filter, groupBy: tag.groupBy };
  }

  // A counter option as a JSON number when that is exact, else as the string the server parses.
  function jsonInteger(text) {
    const n = Number(text);
    return Number.isSafeInteger(n) && String(n) === text.trim() ? n : text.trim();
  }

  function queryBody(state) {
    const body = { start: state.start };
    if (state.end) body.end = state.end;
    body.msResolution = true;
    if (state.queries.length > 1) body.showQuery = true;
    body.queries = state.queries.map((q) => {
      const sub = { aggregator: q.aggregator, metric: q.metric };
      if (q.downsample) sub.downsample = formatDownsample(q.downsample);
      if (q.rate) {
        sub.rate = true;
        if (q.rate.counter || q.rate.drop) {
          sub.rateOptions = { counter: true };
          if (q.rate.max !== '') sub.rateOptions.counterMax = jsonInteger(q.rate.max);
          if (q.rate.reset !== '') sub.rateOptions.resetValue = jsonInteger(q.rate.reset);
          if (q.rate.drop) sub.rateOptions.dropResets = true;
        }
      }
      if (q.explicitTags) sub.explicitTags = true;
      if (q.percentiles) sub.percentiles = q.percentiles;
      if (q.tags.length) sub.filters = q.tags.map(tagFilter);
      return sub;
    });
    return body;
  }

  // ---------------------------------------------------------------------------------------------
  // The page URL.

  // Percent-encodes a parameter value but leaves the characters of the m= syntax readable.
  function encodeParam(s) {
    return encodeURIComponent(s).replace(/%(3A|7B|7D|3D|2C|7C|2F|40|5B|5D)/gi, (c) => decodeURIComponent(c));
  }

  function urlQuery(state) {
    const parts = [`start=${encodeParam(state.start)}`];
    if (state.end) parts.push(`end=${encodeParam(state.end)}`);
    for (const q of state.queries) parts.push(`m=${encodeParam(formatM(q))}`);
    return parts.join('&');
  }

  // Reads the query from `?start=…&m=…` or, as OpenTSDB's own GUI writes it, `#start=…&m=…`.
  function stateFromUrl() {
    let params = new URLSearchParams(location.search);
    if (!params.has('m') && location.hash.length > 1) {
      params = new URLSearchParams(location.hash.slice(1));
    }
    const state = { start: params.get('start') || '', end: params.get('end') || '', queries: [], errors: [] };
    for (const m of params.getAll('m')) {
      try {
        state.queries.push(parseM(m));
      } catch (e) {
        state.errors.push(e.message);
      }
    }
    if (!state.start && state.queries.length) state.start = '1h-ago';
    return state;
  }

  // ---------------------------------------------------------------------------------------------
  // The form.

  function fillSelect(select, values, selected) {
    const all = values.includes(selected) || !selected ? values : [selected, ...values];
    select.replaceChildren(...all.map((v) => new Option(v, v, false, v === selected)));
  }

  function tagElement(tag) {
    const el = $('#tag-template').content.firstElementChild.cloneNode(true);
    $('.tag-key', el).value = tag.key;
    $('.tag-value', el).value = tag.value;
    $('.group-by', el).checked = tag.groupBy;
    return el;
  }

  function queryElement(q) {
    const el = $('#query-template').content.firstElementChild.cloneNode(true);
    $('.metric', el).value = q.metric;
    fillSelect($('.aggregator', el), aggregators, q.aggregator);
    $('.explicit-tags', el).checked = q.explicitTags;
    for (const t of q.tags) $('.tags', el).append(tagElement(t));
    const ds = q.downsample || { interval: '', fn: 'avg', fill: 'none' };
    $('.ds-on', el).checked = Boolean(q.downsample);
    $('.ds-interval', el).value = ds.interval;
    fillSelect($('.ds-fn', el), aggregators, ds.fn);
    const fill = $('.ds-fill', el);
    if (!FILLS.includes(ds.fill)) fill.prepend(new Option(ds.fill, ds.fill));
    fill.value = ds.fill;
    const rate = q.rate || { counter: false, max: '', reset: '', drop: false };
    $('.rate', el).checked = Boolean(q.rate);
    $('.counter', el).checked = rate.counter;
    $('.counter-max', el).value = rate.max;
    $('.reset-value', el).value = rate.reset;
    $('.drop-resets', el).checked = rate.drop;
    // Not editable here, but kept so that a shared link comes back unchanged.
    el.dataset.percentiles = q.percentiles ? JSON.stringify(q.percentiles) : '';
    updateEnabled(el);
    return el;
  }

  function updateEnabled(el) {
    const ds = $('.ds-on', el).checked;
    for (const c of ['.ds-interval', '.ds-fn', '.ds-fill']) $(c, el).disabled = !ds;
    const rate = $('.rate', el).checked;
    const counter = rate && $('.counter', el).checked;
    $('.counter', el).disabled = !rate;
    for (const c of ['.counter-max', '.reset-value', '.drop-resets']) $(c, el).disabled = !counter;
  }

  function renderForm(state) {
    $('#start').value = state.start || '1h-ago';
    $('#end').value = state.end;
    const queries = state.queries.length ? state.queries : [emptyQuery()];
    $('#queries').replaceChildren(...queries.map(queryElement));
    syncPicker('start');
    syncPicker('end');
  }

  function readForm() {
    const queries = $$('#queries .query').map((el) => ({
      aggregator: $('.aggregator', el).value,
      metric: $('.metric', el).value.trim(),
      explicitTags: $('.explicit-tags', el).checked,
      tags: $$('.tag', el)
        .map((t) => ({
          key: $('.tag-key', t).value.trim(),
          value: $('.tag-value', t).value.trim(),
          groupBy: $('.group-by', t).checked,
        }))
        .filter((t) => t.key || t.value),
      downsample: $('.ds-on', el).checked ? {
        interval: $('.ds-interval', el).value.trim() || '1m',
        fn: $('.ds-fn', el).value,
        fill: $('.ds-fill', el).value,
      } : null,
      rate: $('.rate', el).checked ? {
        counter: $('.counter', el).checked,
        max: $('.counter', el).checked ? $('.counter-max', el).value.trim() : '',
        reset: $('.counter', el).checked ? $('.reset-value', el).value.trim() : '',
        drop: $('.counter', el).checked && $('.drop-resets', el).checked,
      } : null,
      percentiles: el.dataset.percentiles ? JSON.parse(el.dataset.percentiles) : null,
    })).filter((q) => q.metric);
    return { start: $('#start').value.trim() || '1h-ago', end: $('#end').value.trim(), queries, errors: [] };
  }

  // Absolute times: OpenTSDB reads `yyyy/MM/dd-HH:mm:ss` in UTC; the pickers show local time.
  const pad = (n) => String(n).padStart(2, '0');

  function toOpenTsdbTime(date) {
    return `${date.getUTCFullYear()}/${pad(date.getUTCMonth() + 1)}/${pad(date.getUTCDate())}-`
      + `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`;
  }

  function fromOpenTsdbTime(text) {
    const m = /^(\d{4})\/(\d{2})\/(\d{2})(?:[- ](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(text);
    if (!m) return null;
    const [, y, mo, d, h = '0', mi = '0', s = '0'] = m;
    return new Date(Date.UTC(+y, +mo - 1, +d, +h, +mi, +s));
  }

  function syncPicker(which) {
    const date = fromOpenTsdbTime($(`#${which}`).value.trim());
    const picker = $(`#${which}-picker`);
    picker.value = date ? `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T`
      + `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}` : '';
  }

  // ---------------------------------------------------------------------------------------------
  // Suggestions: metrics, tag keys and values through /api/suggest; the tags a metric actually has
  // through /api/search/lookup.

  const lookups = new Map();

  async function getJson(url) {
    try {
      const resp = await fetch(url);
      return resp.ok ? await resp.json() : null;
    } catch (e) {
      return null;
    }
  }

  async function suggest(type, prefix) {
    const names = await getJson(`api/suggest?type=${type}&q=${encodeURIComponent(prefix)}&max=${SUGGEST_MAX}`);
    return Array.isArray(names) ? names : [];
  }

  // tag key -> Set of values, for the series of `metric`; null when unknown.
  async function metricTags(metric) {
    if (!metric) return null;
    if (!lookups.has(metric)) {
      lookups.set(metric, getJson(`api/search/lookup?m=${encodeURIComponent(metric)}&limit=0`).then((j) => {
        if (!j || !Array.isArray(j.results)) return null;
        const tags = new Map();
        for (const s of j.results) {
          for (const [k, v] of Object.entries(s.tags || {})) {
            if (!tags.has(k)) tags.set(k, new Set());
            tags.get(k).add(v);
          }
        }
        return tags;
      }));
    }
    return lookups.get(metric);
  }

  function fillDatalist(id, values) {
    $(`#${id}`).replaceChildren(...[...new Set(values)].sort().map((v) => new Option('', v)));
  }

  async function suggestFor(input) {
    const prefix = input.value.trim();
    const query = input.closest('.query');
    if (input.classList.contains('metric')) {
      fillDatalist('metric-list', await suggest('metrics', prefix));
    } else if (input.classList.contains('tag-key')) {
      const tags = await metricTags($('.metric', query).value.trim());
      const keys = tags && tags.size ? [...tags.keys()] : await suggest('tagk', prefix);
      fillDatalist('tagk-list', keys.filter((k) => k.startsWith(prefix)));
    } else if (input.classList.contains('tag-value')) {
      const key = $('.tag-key', input.closest('.tag')).value.trim();
      const tags = await metricTags($('.metric', query).value.trim());
      const values = tags && tags.has(key) ? [...tags.get(key)] : await suggest('tagv', prefix);
      fillDatalist('tagv-list', ['*', ...values.filter((v) => v.startsWith(prefix))]);
    }
  }

  let suggestTimer = 0;
  function scheduleSuggest(input) {
    clearTimeout(suggestTimer);
    suggestTimer = setTimeout(() => suggestFor(input), SUGGEST_DELAY_MS);
  }

  // ---------------------------------------------------------------------------------------------
  // Running the query and drawing it.

  function showError(message) {
    const box = $('#error');
    box.textContent = message || '';
    box.hidden = !message;
  }

  function setStatus(text) {
    $('#status').textContent = text;
  }

  function clearChart() {
    if (plot) plot.destroy();
    plot = null;
    $('#chart').replaceChildren();
  }

  // POSIX-shell single quoting.
  const shellQuote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

  function showShare(state) {
    const qs = urlQuery(state);
    // The page and the API share a base, so this also holds behind a proxy that adds a prefix.
    const page = `${location.origin}${location.pathname}`;
    const api = new URL('api/query', location.href).href;
    $('#link').value = `${page}?${qs}`;
    const body = queryBody(state);
    $('#body').textContent = JSON.stringify(body, null, 2);
    $('#curl').textContent = [
      `curl -s ${shellQuote(api)} -H 'Content-Type: application/json' \\`,
      `  -d ${shellQuote(JSON.stringify(body))}`,
      '',
      '# The same in the GET form; -g keeps curl from globbing the braces.',
      `curl -sg ${shellQuote(`${api}?${qs}&ms`)}`,
    ].join('\n');
  }

  // The error JSON's message (and details), as OpenTSDB writes it.
  function apiError(status, json, text) {
    const err = json && json.error;
    if (err && err.message) {
      return err.details ? `${err.message}\n${err.details}` : err.message;
    }
    return `The server answered ${status}: ${text.slice(0, 500)}`;
  }

  // A dps value as a plotted number: "NaN", "Infinity" and null are gaps.
  function plotted(v) {
    return typeof v === 'number' && Number.isFinite(v) ? v : null;
  }

  function seriesLabel(r, numbered) {
    const tags = Object.keys(r.tags || {}).sort().map((k) => `${k}=${r.tags[k]}`);
    const label = `${r.metric}{${tags.join(', ')}}`;
    return numbered && r.query ? `#${r.query.index + 1} ${label}` : label;
  }

  function chartWidth() {
    return Math.max(320, $('main').clientWidth - 20);
  }

  // Draws the result and returns the number of points drawn.
  function draw(results, state) {
    clearChart();
    const series = results.map((r) => {
      const dps = Array.isArray(r.dps) ? r.dps : Object.entries(r.dps || {});
      return { label: seriesLabel(r, state.queries.length > 1), dps: dps.map(([t, v]) => [Number(t), plotted(v)]) };
    });
    // One x axis for all: the union of the timestamps. A series with no point at a time gets
    // `undefined` there, which uPlot draws across; a null (a NaN or null fill) is a gap.
    const xs = [...new Set(series.flatMap((s) => s.dps.map(([t]) => t)))].sort((a, b) => a - b);
    const index = new Map(xs.map((t, i) => [t, i]));
    let points = 0;
    const ys = series.map((s) => {
      const y = new Array(xs.length).fill(undefined);
      for (const [t, v] of s.dps) {
        y[index.get(t)] = v;
        if (v !== null) points += 1;
      }
      return y;
    });
    if (xs.length) {
      plot = new uPlot({
        width: chartWidth(),
        height: CHART_HEIGHT,
        scales: { x: { time: true } },
        series: [
          { label: 'time' },
          ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5 })),
        ],
      }, [xs.map((t) => t / 1000), ...ys], $('#chart'));
    }
    return points;
  }

  async function run(state) {
    const seq = ++runSeq;
    const chart = $('#chart');
    chart.removeAttribute('data-points');
    showShare(state);
    if (state.errors.length) {
      clearChart();
      showError(state.errors.join('\n'));
      setStatus('');
      return;
    }
    showError(null);
    if (!state.queries.length) {
      clearChart();
      setStatus('Pick a metric to graph.');
      return;
    }
    setStatus('Loading…');
    const started = performance.now();
    let status = 0;
    let text = '';
    try {
      const resp = await fetch('api/query', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(queryBody(state)),
      });
      status = resp.status;
      text = await resp.text();
    } catch (e) {
      if (seq !== runSeq) return;
      clearChart();
      showError(`The query could not be sent: ${e.message}`);
      setStatus('');
      return;
    }
    if (seq !== runSeq) return;
    let json = null;
    try {
      json = JSON.parse(text);
    } catch (e) {
      json = null;
    }
    if (status !== 200 || !Array.isArray(json)) {
      clearChart();
      showError(apiError(status, json, text));
      setStatus('');
      return;
    }
    const points = draw(json, state);
    const took = Math.round(performance.now() - started);
    setStatus(json.length ? `${json.length} series, ${points} points, ${took} ms` : `No data (${took} ms)`);
    chart.dataset.points = String(points);
  }

  function submit(push) {
    const state = readForm();
    const search = `?${urlQuery(state)}`;
    if (push && search !== location.search) history.pushState(null, '', location.pathname + search);
    run(state);
  }

  // ---------------------------------------------------------------------------------------------
  // Wiring.

  function wire() {
    const form = $('#form');
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      submit(true);
    });
    form.addEventListener('click', (e) => {
      const button = e.target.closest('button');
      if (!button) return;
      const query = button.closest('.query');
      if (button.id === 'add') {
        $('#queries').append(queryElement(emptyQuery()));
      } else if (button.classList.contains('remove')) {
        if ($$('#queries .query').length > 1) query.remove();
        else query.replaceWith(queryElement(emptyQuery()));
      } else if (button.classList.contains('add-tag')) {
        $('.tags', query).append(tagElement({ key: '', value: '*', groupBy: true }));
      } else if (button.classList.contains('remove-tag')) {
        button.closest('.tag').remove();
      } else if (button.dataset.start) {
        $('#start').value = button.dataset.start;
        $('#end').value = '';
        syncPicker('start');
        syncPicker('end');
        submit(true);
      }
    });
    form.addEventListener('change', (e) => {
      const query = e.target.closest('.query');
      if (query) updateEnabled(query);
      for (const which of ['start', 'end']) {
        if (e.target.id === `${which}-picker`) {
          const value = e.target.value;
          $(`#${which}`).value = value ? toOpenTsdbTime(new Date(value)) : '';
        } else if (e.target.id === which) {
          syncPicker(which);
        }
      }
    });
    for (const type of ['input', 'focusin']) {
      form.addEventListener(type, (e) => {
        if (e.target.matches('.metric, .tag-key, .tag-value')) scheduleSuggest(e.target);
      });
    }
    window.addEventListener('popstate', () => {
      const state = stateFromUrl();
      renderForm(state);
      run(state);
    });
    window.addEventListener('resize', () => {
      if (plot) plot.setSize({ width: chartWidth(), height: CHART_HEIGHT });
    });
  }

  async function init() {
    wire();
    const [names, version] = await Promise.all([getJson('api/aggregators'), getJson('api/version')]);
    if (Array.isArray(names) && names.length) aggregators = [...names].sort();
    if (version && version.version) $('#version').textContent = `v${version.version}`;
    const state = stateFromUrl();
    renderForm(state);
    run(state);
  }

  // For the browser tests: the m= codec and the JSON body it maps to.
  window.strataUi = { parseM, formatM, queryBody };

  init();
})();
