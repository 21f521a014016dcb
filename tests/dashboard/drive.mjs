// Drives the dashboard of a running `wfhost serve` in headless chromium,
// as a person would, and checks what the page shows after each action.
// Screenshots go to SHOTS_DIR. Prints one JSON line of measurements; any
// failed check throws (non-zero exit, with the reason).
//
// Usage: node drive.mjs BASE_URL SCENARIO_JSON SHOTS_DIR
//   SCENARIO_JSON: {"waiting": RUN, "forked": RUN, "big": RUN, "big_events": N, "lanes": RUN,
//                   "inbox": RUN, "greet_ws": DIR, "long_block": NAME, ...}
import { chromium } from 'playwright-core';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [base, scenarioFile, shots] = process.argv.slice(2);
const scenario = JSON.parse(readFileSync(scenarioFile, 'utf8'));
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const measured = {};

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
// While the server is made to go away, its dropped connections are expected.
let serverAway = false;
// While the page submits a form the server refuses, its 400s are expected.
let refusals = false;
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  if (serverAway && /net::ERR_/.test(m.text())) return;
  if (refusals && /status of 400/.test(m.text())) return;
  problems.push(`console: ${m.text()}`);
});
// The page asks before it forks or cancels: say yes.
page.on('dialog', (d) => d.accept());
const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });

try {
  // The runs page.
  let t0 = Date.now();
  await page.goto(base, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('#run-list li[data-run]');
  measured.runs_page_ms = Date.now() - t0;
  const listed = await page.locator('#run-list li[data-run]').count();
  check(listed >= 4, `the sidebar lists the runs (${listed})`);
  await shot('01-runs');

  // A running block's output, live under its row, with its clock.
  if (scenario.live) {
    await page.goto(`${base}#/runs/${scenario.live}`, { waitUntil: 'domcontentloaded' });
    await page.waitForFunction(() => /tick \d+/.test(document.querySelector('pre.live-output')?.textContent || ''), null, { timeout: 30000 });
    const first = await page.locator('pre.live-output').textContent();
    await page.waitForFunction((before) => (document.querySelector('pre.live-output')?.textContent || '') !== before, first, { timeout: 10000 });
    const clock = await page.locator('tr.output-row .muted').first().textContent();
    check(/running for/.test(clock), `the running row shows its time (${clock})`);
    const shown = await page.locator('pre.live-output > div').count();
    check(shown >= 1 && shown <= 8, `the running row keeps a tail (${shown} lines)`);
    await shot('00-live-output');
    await page.goto(base, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('#run-list li[data-run]');
  }

  // A rolled-back violation is on the step's row, though it succeeded.
  if (scenario.quiet) {
    await page.goto(`${base}#/runs/${scenario.quiet}`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('tr.warnings-row .warning');
    const warned = await page.locator('tr.warnings-row').first().textContent();
    check(/rolled back: README/.test(warned), `the step shows its rolled-back change (${warned})`);
    await page.goto(base, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('#run-list li[data-run]');
  }

  // A run waiting to retry its failed block: when, and why.
  if (scenario.retrying) {
    await page.goto(`${base}#/runs/${scenario.retrying}`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('p.timer');
    const due = await page.locator('p.timer').textContent();
    check(/Retry 1 of main\.build is due \d{4}-\d\d-\d\d/.test(due), `the header says which retry is due when (${due})`);
    const marker = await page.locator('tr.marker.retry').first().textContent();
    check(/main\.build attempt 1 → SIGNAL:EXEC_FAILED; retry 1 in 3600\.00 s/.test(marker), `the steps show the retry and its wait (${marker})`);
    await shot('00-retry-due');
    await page.goto(base, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('#run-list li[data-run]');
  }

  // A schedule: listed in its tab, its page paused from a button.
  if (scenario.schedule) {
    await page.click('#tab-schedules');
    await page.waitForSelector(`#schedule-list li[data-schedule="${scenario.schedule}"]`);
    const listed = await page.locator(`#schedule-list li[data-schedule="${scenario.schedule}"]`).textContent();
    check(/0 3 \* \* \*/.test(listed) && /Europe\/Berlin/.test(listed) && /next /.test(listed), `the schedule is listed with its expression and next tick (${listed})`);
    await page.click(`#schedule-list li[data-schedule="${scenario.schedule}"]`);
    await page.waitForSelector('section.schedule h2');
    await page.click('section.schedule button:has-text("Pause")');
    await page.waitForSelector('section.schedule button:has-text("Resume")');
    const head = await page.locator('section.schedule h2').textContent();
    check(/paused/.test(head), `the page shows the schedule paused (${head})`);
    await shot('00-schedule');
    await page.click('#tab-runs');
    await page.goto(base, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('#run-list li[data-run]');
  }

  // Every control has an accessible name.
  const unnamed = await page.evaluate(() => [...document.querySelectorAll('button, input, select, textarea')]
    .filter((el) => !el.hidden && !(el.getAttribute('aria-label') || el.textContent.trim() || el.labels?.length))
    .map((el) => el.outerHTML.slice(0, 80)));
  check(unnamed.length === 0, `controls without a name: ${unnamed.join(' | ')}`);

  // Find a run by text: the 100,000-event one.
  await page.fill('#filter-q', scenario.big);
  await page.waitForFunction((id) => {
    const items = document.querySelectorAll('#run-list li[data-run]');
    return items.length === 1 && items[0].dataset.run === id;
  }, scenario.big);
  t0 = Date.now();
  await page.click(`#run-list li[data-run="${scenario.big}"]`);
  await page.waitForSelector('main[data-events="500"] table.steps tr.step');
  measured.big_run_first_render_ms = Date.now() - t0;
  const nextBefore = await page.locator('.more.earlier').count();
  check(nextBefore === 1, 'a long run offers its earlier events');
  await shot('02-big-run');
  // Earlier pages load on demand; the DOM holds only what was loaded.
  await page.click('.more.earlier');
  await page.waitForFunction(() => Number(document.querySelector('main').dataset.events) >= 1000);
  const seqs = await page.evaluate(() => [...document.querySelectorAll('table.steps tr[data-seq]')].map((tr) => Number(tr.dataset.seq)));
  check(seqs.every((s, i) => i === 0 || s > seqs[i - 1]), 'earlier pages join the timeline once each, in order');
  const rows = await page.locator('table.steps tr').count();
  check(rows < 2000, `a page of a long run stays small (${rows} rows)`);

  // Keyboard: select steps with n/p and see their details.
  await page.locator('.timeline-scroll').focus();
  await page.keyboard.press('n');
  await page.waitForSelector('aside.detail h3');
  // The selected row is the first loaded: loading earlier events (which
  // may complete its step) keeps it selected.
  const loaded = Number(await page.getAttribute('main', 'data-events'));
  await page.evaluate(() => { const b = document.querySelector('.more.earlier'); if (b) b.click(); });
  await page.waitForFunction((n) => Number(document.querySelector('main').dataset.events) > n, loaded);
  await page.waitForSelector('tr.step.selected');
  await page.waitForSelector('aside.detail h3');
  const first = await page.getAttribute('tr.step.selected', 'data-seq');
  await page.keyboard.press('n');
  await page.waitForFunction((s) => {
    const sel = document.querySelector('tr.step.selected');
    return sel && Number(sel.dataset.seq) > Number(s);
  }, first);

  // The forked run: its second branch, reached from the branch graph.
  await page.fill('#filter-q', '');
  await page.waitForFunction(() => document.querySelectorAll('#run-list li[data-run]').length >= 4);
  await page.goto(`${base}#/runs/${scenario.forked}`);
  await page.waitForSelector('.branch-list li:nth-child(2) a');
  const branches = await page.locator('.branch-list li').count();
  check(branches === 2, `the forked run shows two branches (${branches})`);
  check(await page.locator('svg.branch-svg path.fork-link').count() === 1, 'the fork is drawn from its parent');
  await page.click('.branch-list li:nth-child(2) a');
  await page.waitForSelector('main[data-branch="2"] tr.marker');
  const forkMarker = await page.locator('tr.marker', { hasText: 'forked from' }).count();
  check(forkMarker === 1, 'branch 2 starts with its fork');
  await shot('03-fork');

  // Parallel lanes side by side, with their conflict.
  await page.goto(`${base}#/runs/${scenario.lanes}`);
  await page.waitForSelector('.lanes .lane-card');
  const lanes = await page.locator('.lanes .lane-card').count();
  check(lanes === 2, `two lanes side by side (${lanes})`);
  check(await page.locator('.merge .conflict').count() >= 1, 'the lanes\' conflict and its outcome are shown');
  await shot('04-lanes');

  // A block's result bundle: its command, exit, stdout and stderr.
  await page.goto(`${base}#/runs/${scenario.exec}`);
  await page.click('tr.step:has-text("main.build")');
  await page.waitForSelector('.bundles .stream.stdout pre:has-text("built-ok")');
  await page.waitForSelector('.bundles .stream.stderr pre:has-text("warning: flaky test")');
  check(await page.locator('.bundles .argv:has-text("exit 3")').count() === 1, 'the command and its exit are shown');
  await shot('05-bundle');

  // Answer a gate from the page and see the run go on, live: no reload.
  await page.goto(`${base}#/runs/${scenario.waiting}`);
  await page.waitForSelector('.gate-panel button.primary');
  await page.evaluate(() => { window.__sameDocument = true; });
  await shot('06-gate');
  const before = Number(await page.getAttribute('main', 'data-last-seq'));
  await page.click('.gate-panel button.primary');
  // The approved plan ships: its next block appears on the timeline.
  await page.waitForSelector('tr.step:has-text("main.ship")', { timeout: 60000 });
  await page.waitForFunction((n) => Number(document.querySelector('main').dataset.lastSeq) > n, before);
  check(await page.evaluate(() => window.__sameDocument === true), 'the page updated without reloading');
  await page.waitForSelector('.run-head .badge.s-succeeded', { timeout: 30000 });
  check(await page.locator('.gate-panel').count() === 0, 'the answered gate is gone');
  await shot('07-gate-answered');

  // Fork from the page: a new branch after the first step (its gate
  // answered), which goes on to ship on its own.
  await page.click('tr.step:has(td:nth-child(2):has-text("main.draft")) button[aria-label^="Fork"]');
  await page.waitForSelector('main[data-branch="2"]', { timeout: 60000 });
  await page.waitForSelector('.branch-list li:nth-child(2) a.current');
  await page.waitForSelector('tr.marker:has-text("branch 2 forked from")');
  await page.waitForSelector('tr.step td:nth-child(2):has-text("main.ship")', { timeout: 60000 });
  await page.waitForSelector('.run-head .badge.s-succeeded', { timeout: 60000 });
  // A finished run shows what it produced.
  await page.waitForSelector('.result-panel .result-text');
  const produced = await page.textContent('.result-panel .meta');
  check(/ from step \d+ \(main\.\w+\)/.test(produced), `the result names its step and block (${produced})`);
  await shot('07a-result');
  // Cancel from the page: a waiting run, for good.
  await page.goto(`${base}#/runs/${scenario.cancel}`);
  await page.waitForSelector('.gate-panel');
  await page.click('.run-head button.danger');
  await page.waitForSelector('.run-head .badge.s-cancelled', { timeout: 60000 });
  await page.waitForSelector('tr.marker.s-cancelled:has-text("run cancelled by the dashboard through the HTTP API")');
  await shot('07b-forked-and-cancelled');

  // A fan-in gate: pick the lane a conflicting file comes from.
  await page.goto(`${base}#/runs/${scenario.choose}`);
  await page.waitForSelector('.gate-panel .choices select');
  const file = await page.getAttribute('.gate-panel .choices select', 'data-file');
  check(file === 'docs/shared.py', `the conflicting file is offered (${file})`);
  await page.selectOption('.gate-panel .choices select', 'ui');
  await shot('08-fan-in');
  await page.click('.gate-panel button.primary');
  await page.waitForSelector('.run-head .badge.s-succeeded', { timeout: 60000 });
  await page.waitForSelector('.merge .conflict:has-text("→ ui, chosen at gate")');
  check(await page.locator('tr.step td:nth-child(2):has-text("dev.implement")').count() === 1, 'the answered fan-in stays one execution');

  // Workflows: the list, a form built from the inputs schema, the
  // server's refusals next to their fields, and the run it starts.
  await page.click('#tab-workflows');
  await page.waitForSelector('#workflow-list li[data-path="greet.json"]');
  check(await page.locator('#workflow-list li.broken[data-path="broken.json"] .error').count() === 1, 'a workflow that does not load is listed with its error');
  await page.click('#workflow-list li[data-path="greet.json"]');
  await page.waitForSelector('form.start-form');
  check(await page.inputValue('#input-times') === '2', 'an integer input shows its default');
  check(await page.inputValue('#input-tone') === '"warm"', 'an enum input is a choice with its default');
  check(await page.locator('.field[data-input="name"] .required').count() === 1, 'a required input is marked');
  check(/Who to greet/.test(await page.textContent('.field[data-input="name"] .hint')), 'the description is the hint');
  check(await page.locator('#input-loud[type="checkbox"]').count() === 1, 'a boolean input is a checkbox');
  check(await page.locator('textarea#input-tags').count() === 1, 'a list of text is one item a line');
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('form.start-form input, form.start-form select, form.start-form textarea')]
    .filter((el) => !el.labels?.length).map((el) => el.id));
  check(unlabelled.length === 0, `form controls without a label: ${unlabelled.join(', ')}`);
  refusals = true;
  await page.fill('#start-workspace', 'not/absolute');
  await page.click('form.start-form button[type="submit"]');
  await page.waitForSelector('#workspace-field.invalid .field-error:not(:empty)');
  check(/absolute/.test(await page.textContent('#workspace-field .field-error')), 'a refused workspace is shown at its field');
  await page.fill('#start-workspace', scenario.greet_ws);
  await page.click('form.start-form button[type="submit"]');
  await page.waitForSelector('.field[data-input="name"].invalid .field-error:not(:empty)');
  check(/name/.test(await page.textContent('.field[data-input="name"] .field-error')), 'the missing input is named next to its field');
  check(await page.locator('#workspace-field.invalid').count() === 0, 'the fixed workspace is no longer marked');
  await shot('12-form-refused');
  await page.fill('#input-name', 'Ada');
  await page.fill('#input-times', 'lots');
  await page.click('form.start-form button[type="submit"]');
  await page.waitForSelector('.field[data-input="times"].invalid .field-error:not(:empty)');
  check(await page.locator('.field[data-input="name"].invalid').count() === 0, 'a fixed field is no longer marked');
  refusals = false;
  await page.fill('#input-times', '3');
  await page.check('#input-loud');
  await page.fill('#input-tags', 'a\nb');
  await page.click('form.start-form button[type="submit"]');
  await page.waitForFunction(() => /^#\/runs\/run-/.test(location.hash), null, { timeout: 30000 });
  const greetRun = decodeURIComponent((await page.evaluate(() => location.hash)).slice('#/runs/'.length));
  await page.waitForSelector('.run-head .badge.s-succeeded', { timeout: 60000 });
  const firstEvents = await page.evaluate(async (id) => (await (await fetch(`/v1/runs/${id}/events?limit=1`)).json()).events, greetRun);
  const given = firstEvents[0].event.inputs;
  const wanted = { loud: true, name: 'Ada', tags: ['a', 'b'], times: 3, tone: 'warm' };
  check(Object.keys(wanted).every((k) => JSON.stringify(given[k]) === JSON.stringify(wanted[k])), `the run got the form's inputs (${JSON.stringify(given)})`);

  // The workflow graph with the branch's path on it.
  await page.waitForSelector('svg.wf-graph g.block');
  check(await page.locator('svg.wf-graph g.block').count() === 2, 'the graph has the workflow\'s blocks');
  check(await page.getAttribute('svg.wf-graph g.block[data-block="main.greet"]', 'data-order') === '1', 'the first block executed is numbered 1');
  check(await page.getAttribute(`svg.wf-graph g.block[data-block="main.${scenario.long_block}"]`, 'data-order') === '2', 'the second block executed is numbered 2');
  check(await page.locator('svg.wf-graph path.edge.walked').count() === 1, 'the transition taken is drawn as walked');
  const labels = await page.locator('svg.wf-graph text.edge-label').allTextContents();
  check(labels.includes('SUCCESS') && labels.includes('FAIL_DEFAULT'), `edges are labeled by signal (${labels.join(', ')})`);
  await shot('13-graph');

  // A graph of 29 blocks stays readable: layers wrap, no box overlaps
  // another, nothing scrolls sideways.
  await page.goto(`${base}#/runs/${scenario.wide}`);
  await page.waitForSelector('svg.wf-graph g.block[data-block="review.r10"]');
  check(await page.locator('svg.wf-graph g.block').count() === 29, 'every block of a wide workflow is drawn');
  check(await page.getAttribute('svg.wf-graph g.block[data-block="main.join"]', 'data-order') === '3', 'the wide run\'s path is numbered');
  check(await page.locator('svg.wf-graph path.edge.walked').count() === 3, 'the wide run\'s transitions are drawn as walked');
  const overlaps = await page.evaluate(() => {
    const boxes = [...document.querySelectorAll('svg.wf-graph g.block rect')].map((r) => r.getBoundingClientRect());
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    let n = 0;
    boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => { if (hit(a, b)) n++; }));
    const s = document.querySelector('.graph-scroll');
    return { n, sideways: s.scrollWidth > s.clientWidth + 1, smallest: Math.min(...boxes.map((b) => b.width)) };
  });
  check(overlaps.n === 0 && !overlaps.sideways, `the wide graph is laid out (${JSON.stringify(overlaps)})`);
  check(overlaps.smallest >= 100, `the wide graph's boxes stay readable (${overlaps.smallest} px)`);
  await shot('13a-wide-graph');
  await page.goto(`${base}#/runs/${greetRun}`);
  await page.waitForSelector('svg.wf-graph g.block');

  // No timeline cell is clipped at common widths; long actions wrap,
  // their whole text in a title.
  check(await page.locator(`td.action .action-text[title="JUMP:${scenario.long_block}"]`).count() === 1, 'a long action has its full text in a title');
  for (const width of [1024, 1280, 1400, 1920]) {
    await page.setViewportSize({ width, height: 900 });
    await page.waitForTimeout(300);
    const clipped = await page.evaluate(() => {
      const bad = [...document.querySelectorAll('table.steps td, table.steps th')]
        .filter((c) => c.scrollWidth > c.clientWidth + 1)
        .map((c) => `column ${c.cellIndex + 1}: ${c.textContent.slice(0, 40)} (${c.scrollWidth} > ${c.clientWidth})`);
      const s = document.querySelector('.timeline-scroll');
      if (s.scrollWidth > s.clientWidth + 1) bad.push(`the timeline scrolls sideways (${s.scrollWidth} > ${s.clientWidth})`);
      const m = document.querySelector('main');
      if (m.scrollWidth > m.clientWidth + 1) bad.push(`the page scrolls sideways (${m.scrollWidth} > ${m.clientWidth})`);
      return bad;
    });
    check(clipped.length === 0, `at ${width} px: ${clipped.join(' | ')}`);
    await shot(`14-width-${width}`);
  }
  await page.setViewportSize({ width: 1400, height: 900 });

  // Gates waiting for you, across runs, answered from the list.
  await page.goto(`${base}#/runs/${scenario.inbox}`);
  await page.waitForSelector('svg.wf-graph g.block.current[data-block="main.draft"]');
  await page.goto(`${base}#/gates`);
  await page.waitForSelector(`.gate-card[data-run="${scenario.inbox}"]`);
  const open = await page.locator('.gate-card').count();
  check(open >= 2, `every open gate is listed (${open})`);
  const card = await page.textContent(`.gate-card[data-run="${scenario.inbox}"]`);
  check(/review-gate/.test(card) && /Approve the plan\?/.test(card) && /waiting/.test(card), `a gate shows its workflow, prompt and age (${card})`);
  check(await page.textContent('#gate-count') !== '', 'the Gates tab counts the open gates');
  await shot('15-gates');
  await page.click(`.gate-card[data-run="${scenario.inbox}"] button.primary`);
  await page.waitForFunction((id) => !document.querySelector(`.gate-card[data-run="${id}"]`) && document.querySelector('.gate-cards'), scenario.inbox, { timeout: 30000 });

  // Dark theme.
  await page.keyboard.press('t');
  const theme = await page.evaluate(() => document.documentElement.dataset.theme);
  check(theme === 'dark' || theme === 'light', 'the theme toggles');
  await shot('09-theme');
  // Sessions: the session timeline.
  if (scenario.session) {
    await page.goto(`${base}#/sessions/${encodeURIComponent(scenario.session)}`);
    await page.waitForSelector('.session-lanes .lane-bar');
    await shot('10-session');
  }
  // The server goes away while the page follows a run, the run goes on,
  // a new server comes up: the page catches up from its last event,
  // without reloading.
  if (scenario.across) {
    await page.goto(`${base}#/runs/${scenario.across}`);
    await page.waitForSelector('.gate-panel');
    await page.waitForSelector('#live.on');
    await page.evaluate(() => { window.__sameDocument = true; });
    const seen = Number(await page.getAttribute('main', 'data-last-seq'));
    serverAway = true;
    writeFileSync(join(scenario.handshake, 'paused'), '');
    await page.waitForSelector('#live.off', { timeout: 30000 });
    for (let i = 0; i < 1200 && !existsSync(join(scenario.handshake, 'resumed')); i++) await page.waitForTimeout(50);
    await page.waitForSelector('tr.step td:nth-child(2):has-text("main.ship")', { timeout: 60000 });
    await page.waitForFunction((n) => Number(document.querySelector('main').dataset.lastSeq) > n, seen);
    check(await page.evaluate(() => window.__sameDocument === true), 'the page caught up without reloading');
    serverAway = false;
    const seqs = await page.evaluate(() => [...document.querySelectorAll('table.steps tr[data-seq]')].map((tr) => Number(tr.dataset.seq)));
    check(new Set(seqs).size === seqs.length, 'no event is shown twice after the reconnect');
    await shot('11-reconnected');
  }
  // Keyboard: j / k move through the runs, Enter opens one.
  await page.goto(`${base}#/`);
  await page.click('#tab-runs');
  await page.waitForSelector('#run-list li[data-run]');
  await page.locator('#run-list').focus();
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  await page.keyboard.press('Enter');
  const second = await page.getAttribute('#run-list li[data-run]:nth-child(2)', 'data-run');
  await page.waitForFunction((id) => location.hash === `#/runs/${id}`, second);
  check(problems.length === 0, problems.join('\n'));
  console.log(JSON.stringify(measured));
} catch (e) {
  await shot('zz-failure').catch(() => {});
  console.error(e.stack || String(e));
  if (problems.length) console.error(problems.join('\n'));
  process.exitCode = 1;
} finally {
  await browser.close();
}
