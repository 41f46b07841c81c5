// The LuCI page on a real OpenWrt router, through the router's own uhttpd,
// LuCI and rpcd: vmtest/openwrt_luci_test.go runs this inside the test's
// network namespace while the router (make test-openwrt) waits in
// vmtest/openwrt/check-luci.sh. Debian's headless Chromium through
// playwright-core logs in as root (password) and as a read-only rpcd login,
// and compares the page with the router's own ubus replies (a JSON-RPC
// session of root on /ubus). One line per check on stdout:
// "RESULT PASS name", "RESULT FAIL name: why", "RESULT TIME name Ns".
// PS_PHASE graph is instead the Statistics page's packet steering graphs
// (mon-graph-page), drawn by the image's luci-app-statistics and rrdtool
// from the RRDs vmtest/openwrt/check-monitoring.sh's mon-graph had the
// image's collectd write.
//
// Environment: PS_URL (http://198.18.0.2/), PS_ROOT_PW, PS_VIEWER_PW,
// PS_MODE (what Save & Apply sets, from auto), PS_SHOT (screenshot path
// prefix, .png appended), PS_PHASE (luci, the default, or graph).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const { chromium } = await import('playwright-core');

const url = process.env.PS_URL ?? 'http://198.18.0.2/';
const rootPW = process.env.PS_ROOT_PW ?? '';
const viewerPW = process.env.PS_VIEWER_PW ?? '';
const mode = process.env.PS_MODE ?? 'all';
const shot = process.env.PS_SHOT ?? '';
const phase = process.env.PS_PHASE ?? 'luci';
const page_path = 'cgi-bin/luci/admin/network/packet_steering';
// TCG guests under load: LuCI's first page takes seconds.
const SLOW = 90000;

const CHROMIUM_ARGS = [
	'--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
	'--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'
];

function log(...a) { console.log('openwrt.mjs:', ...a); }

// A JSON-RPC call on the router's /ubus.
async function ubus(sid, object, method, args = {}) {
	const r = await fetch(url + 'ubus', {
		method: 'POST',
		headers: { 'Content-Type': 'application/json' },
		body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'call', params: [ sid, object, method, args ] }),
		signal: AbortSignal.timeout(30000)
	});
	return r.json();
}

// The reply's data, or an error naming the call.
async function call(sid, object, method, args = {}) {
	const j = await ubus(sid, object, method, args);
	if (!j.result || j.result[0] !== 0)
		throw new Error(`ubus ${object} ${method}: ${JSON.stringify(j)}`);
	return j.result[1];
}

// A kernel hex mask ("e", "1,00000000") as CPU numbers.
function maskCPUs(mask) {
	const cpus = [];
	const groups = String(mask ?? '').split(',').reverse();
	groups.forEach((g, gi) => {
		const word = parseInt(g || '0', 16);
		for (let b = 0; b < 32; b++)
			if (Math.floor(word / 2 ** b) % 2)
				cpus.push(gi * 32 + b);
	});
	return cpus;
}

// A CPU list ("0-2,5") as CPU numbers.
function listCPUs(list) {
	const cpus = [];
	for (const part of String(list ?? '').split(',').filter((p) => p !== '')) {
		const [ a, b ] = part.split('-').map(Number);
		for (let c = a; c <= (b ?? a); c++)
			cpus.push(c);
	}
	return cpus;
}

// The CPUs a page's cells of dev/queue carry a mark on.
async function marked(page, dev, queue, sel) {
	return page.$$eval(`[data-device="${dev}"] .ps-cell[data-queue="${queue}"]`, (cells, s) =>
		cells.filter((c) => c.querySelector(s)).map((c) => +c.getAttribute('data-cpu')), sel);
}
const RPS = '[data-mark="rps"][data-state="both"], [data-mark="rps"][data-state="drop"]';

// login opens the page in a fresh browser context (a window of width
// pixels) and logs in through LuCI's own login form; it returns the page
// (and its console errors).
async function login(browser, user, password, width = 1280) {
	const context = await browser.newContext({ viewport: { width, height: 900 } });
	const page = await context.newPage();
	const errors = [];
	page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
	page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
	page.setDefaultTimeout(SLOW);
	const res = await page.goto(url + page_path, { timeout: SLOW });
	assert.equal(res.status(), 403, `${page_path} without a session: HTTP ${res.status()} (want LuCI's login, 403)`);
	await page.fill('input[name="luci_username"]', user);
	await page.fill('input[name="luci_password"]', password);
	// The login form's own 403 is not an error of the page.
	errors.length = 0;
	await Promise.all([
		page.waitForNavigation({ timeout: SLOW }),
		page.press('input[name="luci_password"]', 'Enter')
	]);
	return { context, page, errors };
}

// toTop scrolls the page and every scrolled box (themes such as the
// 23.05.5 image's scroll their content pane, not the window) to the top.
function toTop() {
	window.scrollTo(0, 0);
	for (const e of document.querySelectorAll('*'))
		if (e.scrollTop)
			e.scrollTop = 0;
}

const results = [];
function report(line) {
	results.push(line);
	console.log('RESULT ' + line);
}

async function check(name, fn) {
	const t0 = Date.now();
	try {
		await fn();
		report(`PASS ${name}`);
	}
	catch (err) {
		log(`${name}:`, err.stack ?? err);
		report(`FAIL ${name}: ${String(err.message ?? err).split('\n').join(' ').slice(0, 380)}`);
	}
	report(`TIME ${name} ${((Date.now() - t0) / 1000).toFixed(1)}s`);
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
let sid, admin, loggedIn = false, setDone = false;
try {
	if (phase === 'graph')
		await check('mon-graph-page', graphPage);
	else
		await luciChecks();
}
finally {
	await browser.close().catch(() => {});
}
process.exitCode = results.some((r) => r.startsWith('FAIL')) ? 1 : 0;

// graphPage: root logs in, opens Statistics > Graphs and its packet
// steering tab (our definition, packet_steering.js); every graph LuCI asks
// the image's rrdtool for (cgi-exec, the RRDs of /tmp/rrd/HOST/
// packet_steering-cpuN) comes back as a PNG and loads, two per CPU in the
// overview, with no error on the page.
async function graphPage() {
	const a = await login(browser, 'root', rootPW, 1024);
	const p = a.page;
	const j = await ubus('00000000000000000000000000000000', 'session', 'login', { username: 'root', password: rootPW });
	const rootSid = j.result?.[1]?.ubus_rpc_session;
	assert.ok(rootSid, `session login on /ubus: ${JSON.stringify(j)}`);
	const cpus = (await call(rootSid, 'packet_steering', 'status')).platform.cpus;
	// The rrdtool runs LuCI asks for: their command lines and replies.
	const runs = [];
	p.on('request', (r) => {
		if (r.url().includes('/cgi-bin/cgi-exec'))
			runs.push({ cmd: decodeURIComponent(r.postData() ?? ''), reply: r.response().then(async (res) =>
				({ status: res?.status(), head: res ? (await res.body()).subarray(0, 8).toString('hex') : '' })).catch((e) => ({ error: String(e) })) });
	});
	await p.goto(url + 'cgi-bin/luci/admin/statistics/graphs', { timeout: SLOW });
	const tab = p.locator('.cbi-tabmenu li[data-tab="packet_steering"]');
	await tab.waitFor({ timeout: SLOW });
	assert.equal((await tab.textContent()).trim(), 'Packet steering', 'the tab is titled by our definition');
	// The first tab is active (and drawn) on its own.
	if (!/\bcbi-tab\b/.test(await tab.getAttribute('class') ?? ''))
		await tab.locator('a').click();
	const box = '[data-plugin="packet_steering"][data-is-index]';
	await p.waitForFunction(([ sel, n ]) => {
		const imgs = [ ...document.querySelectorAll(sel + ' img') ];
		return imgs.length >= n && imgs.every((i) => i.complete);
	}, [ box, 2 * cpus ], { timeout: SLOW, polling: 500 }).catch(async (err) => {
		// What the page shows instead.
		if (shot)
			await p.screenshot({ path: shot + '-statistics-failed.png', fullPage: true }).catch(() => {});
		const seen = await p.evaluate((sel) => ({
			imgs: [ ...document.querySelectorAll('img') ].map((i) => `${i.complete}:${i.naturalWidth}`).join(' '),
			boxes: [ ...document.querySelectorAll('[data-plugin]') ].map((d) => `${d.getAttribute('data-plugin')}/${d.getAttribute('data-plugin-instance')}/${d.hasAttribute('data-is-index')}`).join(' '),
			inBox: document.querySelectorAll(sel + ' img').length,
			text: (document.querySelector('#maincontent, #view, body')?.innerText ?? '').replace(/\s+/g, ' ').slice(0, 300)
		}), box).catch((e) => String(e));
		throw new Error(`${err.message.split('\n')[0]}; ${runs.length} rrdtool runs; the page: ${JSON.stringify(seen)}`);
	});
	const imgs = await p.$$eval(`${box} img`, (n) => n.map((i) => [ i.naturalWidth, i.naturalHeight ]));
	assert.equal(imgs.length, 2 * cpus, `the overview: ${imgs.length} graphs, ${cpus} CPUs (load and drops each)`);
	for (const [ w, h ] of imgs)
		assert.ok(w > 0 && h > 0, `a graph did not load (${w}x${h})`);
	const replies = await Promise.all(runs.map((r) => r.reply));
	assert.ok(runs.length >= 2, `${runs.length} rrdtool runs`);
	runs.forEach((r, i) => {
		assert.match(r.cmd, /\/usr\/bin\/rrdtool graph - -a PNG /, `run ${i}: ${r.cmd.slice(0, 200)}`);
		assert.equal(replies[i].status, 200, `rrdtool run ${i}: ${JSON.stringify(replies[i])}`);
		assert.equal(replies[i].head, '89504e470d0a1a0a', `rrdtool run ${i} did not answer a PNG: ${JSON.stringify(replies[i])}`);
	});
	// Each CPU's two graphs, each with its own series and legends (LuCI's
	// cgi-exec escapes the command line's spaces).
	const cmds = runs.map((r) => r.cmd.replace(/\\(\s)/g, '$1'));
	const graphs = {
		'Receive load': { files: [ 'packets-processed', 'packets-rps_received' ], legends: [ 'Processed', 'RPS wake-ups' ] },
		'Drops and squeezes': { files: [ 'packets-dropped', 'packets-flow_limit', 'derive-time_squeeze' ], legends: [ 'Dropped (backlog full)', 'Dropped (flow limit)', 'Time squeeze' ] }
	};
	for (let c = 0; c < cpus; c++)
		for (const [ title, g ] of Object.entries(graphs)) {
			const cmd = cmds.find((x) => x.includes(`-t ${title} on cpu${c} `) || new RegExp(`-t \\S+: ${title} on cpu${c} `).test(x));
			assert.ok(cmd, `no graph "${title} on cpu${c}" among: ${cmds.map((x) => (x.match(/-t (.*?) -v/) ?? [])[1]).join('; ')}`);
			const files = [ ...cmd.matchAll(/DEF:[^=]+=\/tmp\/rrd\/[^/]+\/packet_steering-cpu(\d+)\/([a-z_-]+)\.rrd:/g) ].map((m) => `${m[1]}/${m[2]}`);
			assert.deepEqual(files.sort(), g.files.map((f) => `${c}/${f}`).sort(), `"${title} on cpu${c}" draws`);
			for (const l of g.legends)
				assert.ok(cmd.includes(l), `"${title} on cpu${c}" has no legend ${l}`);
		}
	const text = await p.textContent('body');
	assert.ok(!text.includes('No RRD data found'), 'the page says "No RRD data found"');
	assert.equal(await p.locator('.alert-message').count(), 0, 'an alert on the page');
	assert.deepEqual(a.errors, [], 'no console errors');
	log(`graphs: ${imgs.length} (${imgs.map((i) => i.join('x')).join(' ')}), ${runs.length} rrdtool runs`);
	if (shot) {
		// The page's head, the tabs and the first CPU's two graphs.
		await p.evaluate(toTop);
		const second = await p.locator(`${box} img`).nth(1).boundingBox();
		await p.screenshot({ path: shot + '-statistics.png', clip: { x: 0, y: 0, width: 1024, height: Math.ceil(second.y + second.height + 12) } });
	}
	await a.context.close();
}

// luciChecks: the packet steering page (phase luci).
async function luciChecks() {
	await check('luci-login', async () => {
		// rpcd refuses a wrong password (LuCI shows its form again) and
		// accepts root's password; the page draws.
		const bad = await login(browser, 'root', rootPW + 'x');
		assert.equal((await bad.page.$$('input[name="luci_password"]')).length, 1, 'a wrong password: the login form again');
		await bad.context.close();
		admin = await login(browser, 'root', rootPW);
		assert.match(admin.page.url(), /\/admin\/network\/packet_steering$/, `after the login: ${admin.page.url()}`);
		await admin.page.waitForSelector('#ps-mode', { timeout: SLOW });
		await admin.page.waitForSelector('[data-device="eth0"] .ps-colhead');
		const j = await ubus('00000000000000000000000000000000', 'session', 'login', { username: 'root', password: rootPW });
		sid = j.result?.[1]?.ubus_rpc_session;
		assert.ok(sid, `session login on /ubus: ${JSON.stringify(j)}`);
		loggedIn = true;
	});

	await check('luci-queues', async () => {
		assert.ok(loggedIn, 'no login');
		const p = admin.page;
		const st = await call(sid, 'packet_steering', 'status');
		const q = await call(sid, 'packet_steering', 'get_queues', { device: 'eth0' });
		const dev = q.devices.find((d) => d.name === 'eth0');
		assert.ok(dev, `get_queues: ${JSON.stringify(q).slice(0, 200)}`);
		assert.equal(await p.textContent('#ps-mode'), st.mode);
		assert.equal(await p.textContent('#ps-sync'), st.in_sync ? 'In sync' : 'Out of sync');
		const heads = await p.$$eval('[data-device="eth0"] .ps-colhead', (n) => n.map((e) => e.textContent));
		assert.deepEqual(heads, Array.from({ length: st.platform.cpus }, (_, i) => `CPU ${i}`));
		const rows = (await p.$$eval('[data-device="eth0"] .ps-rowhead b', (n) => n.map((e) => e.textContent)))
			.filter((r) => r.startsWith('rx-'));
		assert.deepEqual(rows, dev.rx.map((r) => r.queue), 'rx rows as get_queues');
		assert.equal(rows.length, 4, 'the NIC\'s 4 rx queues');
		for (const r of dev.rx) {
			assert.deepEqual(await marked(p, 'eth0', r.queue, RPS), maskCPUs(r.rps_cpus), `${r.queue} RPS as get_queues (${r.rps_cpus})`);
			if (r.napi?.cpus !== undefined)
				assert.deepEqual(await marked(p, 'eth0', r.queue, '[data-mark="napi"]'), listCPUs(r.napi.cpus), `${r.queue} NAPI thread ${JSON.stringify(r.napi)}`);
		}
		const text = await p.textContent('[data-device="eth0"]');
		for (const r of dev.rx)
			if (r.napi?.thread)
				assert.ok(text.includes(r.napi.thread), `${r.queue}: thread ${r.napi.thread} named on the page`);
	});

	await check('luci-save-apply', async () => {
		assert.ok(loggedIn, 'no login');
		const p = admin.page;
		const before = await call(sid, 'packet_steering', 'get_queues', { device: 'eth0' });
		await p.selectOption('#ps-mode-select', mode);
		await p.getByRole('button', { name: 'Save & Apply' }).click();
		await p.waitForFunction((m) => document.querySelector('#ps-mode')?.textContent === m, mode, { timeout: SLOW });
		setDone = true;
		await p.waitForSelector('#ps-result-summary');
		assert.match(await p.textContent('#ps-result-summary'), new RegExp(`^Mode ${mode}: [1-9]\\d* changed`));
		const st = await call(sid, 'packet_steering', 'status');
		assert.equal(st.mode, mode, 'status after Save & Apply');
		const after = await call(sid, 'packet_steering', 'get_queues', { device: 'eth0' });
		const masks = (r) => r.devices[0].rx.map((x) => x.rps_cpus);
		assert.notDeepEqual(masks(after), masks(before), `rps_cpus changed (${masks(before)} -> ${masks(after)})`);
		// The page follows the router (its next poll at the latest).
		await p.waitForFunction(() => document.querySelector('#ps-sync')?.textContent === 'In sync', null, { timeout: SLOW });
		for (const r of after.devices[0].rx)
			assert.deepEqual(await marked(p, 'eth0', r.queue, RPS), maskCPUs(r.rps_cpus), `${r.queue}: the page shows ${r.rps_cpus}`);
		assert.deepEqual(admin.errors, [], 'no console errors');
		if (shot) {
			await p.evaluate(toTop);
			await p.screenshot({ path: shot + '.png', fullPage: true });
			// The first screen (status and the map), for the docs.
			await p.evaluate(toTop);
			await p.screenshot({ path: shot + '-top.png' });
		}
	});

	await check('luci-readonly', async () => {
		assert.ok(loggedIn && setDone, 'needs the login and the Save & Apply before');
		const st0 = await call(sid, 'packet_steering', 'status');
		const q0 = await call(sid, 'packet_steering', 'get_queues', { device: 'eth0' });
		const v = await login(browser, 'viewer', viewerPW);
		const p = v.page;
		await p.waitForSelector('#ps-mode', { timeout: SLOW });
		assert.equal(await p.textContent('#ps-mode'), mode, 'the viewer sees the mode');
		assert.ok(await p.isVisible('#ps-readonly'), 'the page says it is read-only');
		for (const sel of [ '#ps-mode-select', '#ps-flows', '#ps-save', '#ps-reset', '#ps-apply-now' ])
			assert.ok(await p.isDisabled(sel), `${sel} is disabled`);
		assert.equal((await p.$$('[data-device="eth0"] .ps-colhead')).length, st0.platform.cpus, 'the map is shown');
		await p.click('#ps-save', { force: true, timeout: 5000 }).catch(() => {});
		await p.click('#ps-apply-now', { force: true, timeout: 5000 }).catch(() => {});
		// The viewer's own session, forced over /ubus: refused by rpcd.
		const forced = await p.evaluate(async () => {
			const out = {};
			for (const [ m, a ] of [ [ 'set_mode', { mode: 'off' } ], [ 'apply', {} ] ]) {
				const r = await fetch(L.env.ubuspath.replace(/\/$/, ''), { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'call',
					params: [ L.env.sessionid, 'packet_steering', m, a ] }) });
				out[m] = await r.json();
			}
			return out;
		});
		for (const m of [ 'set_mode', 'apply' ])
			assert.equal(forced[m].error?.code, -32002, `${m} as the viewer: ${JSON.stringify(forced[m])}`);
		if (shot) {
			await p.evaluate(toTop);
			await p.screenshot({ path: shot + '-readonly.png', fullPage: true });
		}
		const st1 = await call(sid, 'packet_steering', 'status');
		const q1 = await call(sid, 'packet_steering', 'get_queues', { device: 'eth0' });
		assert.equal(st1.mode, mode, 'mode unchanged');
		assert.equal(st1.last_apply?.time, st0.last_apply?.time, 'no apply since');
		assert.deepEqual(q1.devices[0].rx.map((x) => x.rps_cpus), q0.devices[0].rx.map((x) => x.rps_cpus), 'rps_cpus unchanged');
		assert.deepEqual(v.errors, [], 'no console errors');
		await v.context.close();
	});
}
