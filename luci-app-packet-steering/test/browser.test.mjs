// Browser test of the LuCI page: runs `packet-steering demo` (built by
// `make test-browser`) on a free port with its own directory, drives Debian's
// headless Chromium through playwright-core, and checks the page against the
// demo router's files on disk.
//
// Run: make test-browser   (or: cd luci-app-packet-steering/test && node --test browser.test.mjs)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let chromium;
try {
	({ chromium } = await import('playwright-core'));
}
catch (err) {
	throw new Error(`playwright-core is missing (${err.message}): run scripts/deps.sh test, or npm install in luci-app-packet-steering/test`);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const binary = path.join(repo, 'packet-steering');
const screenshots = path.join(here, 'screenshots');
const readmePNG = path.join(repo, 'docs', 'demo.png');

const CHROMIUM_ARGS = [
	'--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
	'--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'
];

let tmp, dir, url, context, page;
const demos = [];
const consoleErrors = [];

function freePort() {
	return new Promise((resolve, reject) => {
		const srv = net.createServer();
		srv.on('error', reject);
		srv.listen(0, '127.0.0.1', () => {
			const { port } = srv.address();
			srv.close(() => resolve(port));
		});
	});
}

function killDemos() {
	for (const p of demos)
		if (p.exitCode === null && p.signalCode === null)
			p.kill('SIGKILL');
}

// The demo root's files, read from disk.
function queueDir(dev, root = path.join(dir, 'root')) {
	return path.join(root, 'sys', 'class', 'net', dev, 'queues');
}

function rxQueues(dev) {
	return fs.readdirSync(queueDir(dev)).filter((q) => /^rx-\d+$/.test(q))
		.sort((a, b) => a.slice(3) - b.slice(3));
}

function readKnob(dev, queue, knob) {
	return fs.readFileSync(path.join(queueDir(dev), queue, knob), 'utf8').trim();
}

// Every rx/tx queue knob of every device, and the UCI files: what an apply
// may change.
function snapshotKnobs() {
	const out = {};
	const net = path.join(dir, 'root', 'sys', 'class', 'net');
	for (const dev of fs.readdirSync(net)) {
		const qd = queueDir(dev);
		if (!fs.existsSync(qd))
			continue;
		for (const q of fs.readdirSync(qd))
			for (const f of fs.readdirSync(path.join(qd, q)))
				out[`${dev}/${q}/${f}`] = fs.readFileSync(path.join(qd, q, f), 'utf8');
	}
	const conf = path.join(dir, 'root', 'etc', 'config');
	for (const f of fs.readdirSync(conf))
		out[`etc/config/${f}`] = fs.readFileSync(path.join(conf, f), 'utf8');
	return out;
}

// A kernel hex mask ("e", "1,00000000") as CPU numbers.
function maskCPUs(mask) {
	const cpus = [];
	const groups = mask.split(',').reverse();
	groups.forEach((g, gi) => {
		const word = parseInt(g, 16);
		for (let b = 0; b < 32; b++)
			if (Math.floor(word / 2 ** b) % 2)
				cpus.push(gi * 32 + b);
	});
	return cpus;
}

// The CPUs the page shows as live RPS targets of dev's queue.
async function pageRPS(dev, queue) {
	return page.$$eval(`[data-device="${dev}"] .ps-cell[data-queue="${queue}"]`, (cells) =>
		cells.filter((c) => c.querySelector('[data-mark="rps"][data-state="both"], [data-mark="rps"][data-state="drop"]'))
			.map((c) => +c.getAttribute('data-cpu')));
}

async function dismissNotifications() {
	for (const b of await page.$$('#maincontent > .alert-message button'))
		await b.click();
}

// Runs `packet-steering demo` on a free port with its files in demoDir and
// resolves with the process and its URL once it prints it.
async function runDemo(demoDir, ...extra) {
	const port = await freePort();
	const proc = spawn(binary, [ 'demo', '--port', String(port), '--dir', demoDir, ...extra ], { stdio: [ 'ignore', 'pipe', 'pipe' ] });
	demos.push(proc);
	let out = '';
	const url = await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`demo printed no URL within 30 s:\n${out}`)), 30000);
		proc.stdout.on('data', (chunk) => {
			out += chunk;
			const m = /open\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
			if (m) {
				clearTimeout(timer);
				resolve(m[1]);
			}
		});
		proc.stderr.on('data', (c) => { out += c; });
		proc.on('exit', (code, sig) => {
			clearTimeout(timer);
			reject(new Error(`demo exited (${code ?? sig}) before serving:\n${out}`));
		});
	});
	return { proc, url };
}

// Stops a demo with Ctrl-C (SIGINT), as a user would, and kills it if it
// has not exited within 5 s.
async function stopDemo(proc) {
	if (proc.exitCode !== null || proc.signalCode !== null)
		return;
	const exited = new Promise((resolve) => proc.once('exit', resolve));
	proc.kill('SIGINT');
	const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
	await exited;
	clearTimeout(timer);
}

before(async () => {
	assert.ok(fs.existsSync(binary), `${binary} is missing: run \`make build\` first (make test-browser does)`);
	tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ps-browser-'));
	dir = path.join(tmp, 'demo');
	process.on('exit', killDemos);
	({ url } = await runDemo(dir));
	// A fresh profile in our own directory (launchPersistentContext passes
	// it to Chromium as --user-data-dir).
	context = await chromium.launchPersistentContext(path.join(tmp, 'chromium-profile'), {
		executablePath: '/usr/bin/chromium',
		args: CHROMIUM_ARGS,
		viewport: { width: 1280, height: 900 }
	});
	page = context.pages()[0] ?? await context.newPage();
	page.on('console', (msg) => {
		if (msg.type() === 'error')
			consoleErrors.push(msg.text());
	});
	page.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`));
});

after(async () => {
	if (context)
		await context.close().catch(() => {});
	for (const p of demos)
		await stopDemo(p);
	if (tmp)
		fs.rmSync(tmp, { recursive: true, force: true });
});

test('the page loads without console errors', { timeout: 60000 }, async () => {
	const res = await page.goto(url);
	assert.equal(res.status(), 200);
	assert.match(page.url(), /\/cgi-bin\/luci\/admin\/network\/packet_steering$/);
	await page.waitForSelector('#ps-mode', { timeout: 20000 });
	assert.equal(await page.textContent('#ps-mode'), 'auto');
	assert.equal(await page.textContent('#ps-sync'), 'In sync');
	assert.ok((await page.textContent('#ps-policy')).length > 0, 'policy shown');
	assert.ok(await page.isVisible('#ps-evidence'), 'evidence shown');
	// One poll later the page is still whole and quiet.
	await page.waitForTimeout(5500);
	assert.equal(await page.$$eval('#maincontent > .alert-message', (n) => n.length), 0, 'no notification');
	assert.deepEqual(consoleErrors, []);
});

test('the map shows 4 CPUs and eth0\'s 4 queues, as on disk', { timeout: 30000 }, async () => {
	const heads = await page.$$eval('[data-device="eth0"] .ps-colhead', (n) => n.map((e) => e.textContent));
	assert.deepEqual(heads, [ 'CPU 0', 'CPU 1', 'CPU 2', 'CPU 3' ]);
	const all = await page.$$eval('[data-device="eth0"] .ps-rowhead b', (n) => n.map((e) => e.textContent));
	const rows = all.filter((r) => r.startsWith('rx-'));
	assert.deepEqual(rows, rxQueues('eth0'));
	assert.equal(rows.length, 4);
	assert.equal(await page.$$eval('[data-device="eth0"] .ps-cell[data-queue^="rx-"]', (n) => n.length), 16);
	// tx-0 has an IRQ of its own (edma_txcmpl_0): a row after the rx rows,
	// with its IRQ on the CPU XPS sends tx-0 from.
	assert.deepEqual(all.slice(4), [ 'tx-0' ]);
	const txIRQ = await page.$$eval('[data-device="eth0"] .ps-cell[data-queue="tx-0"]', (cells) =>
		cells.filter((c) => c.querySelector('[data-mark="irq"]')).map((c) => +c.getAttribute('data-cpu')));
	const txXPS = await page.$$eval('[data-device="eth0"] .ps-cell[data-queue="tx-0"]', (cells) =>
		cells.filter((c) => c.querySelector('[data-mark="xps"]')).map((c) => +c.getAttribute('data-cpu')));
	assert.deepEqual(txIRQ, txXPS, 'tx-0 IRQ where XPS sends tx-0 from');
	// Each ring's NAPI thread and IRQ are marked on one CPU each.
	for (const q of rows) {
		const napi = await page.$$eval(`[data-device="eth0"] .ps-cell[data-queue="${q}"] [data-mark="napi"]`, (n) => n.length);
		const irq = await page.$$eval(`[data-device="eth0"] .ps-cell[data-queue="${q}"] [data-mark="irq"]`, (n) => n.length);
		assert.ok(napi >= 1 && irq >= 1, `${q}: NAPI ${napi}, IRQ ${irq} marks`);
		assert.deepEqual(await pageRPS('eth0', q), maskCPUs(readKnob('eth0', q, 'rps_cpus')), `${q} RPS as on disk`);
	}
	assert.equal(await page.$$eval('.ps-cell.ps-diff', (n) => n.length), 0, 'nothing out of sync');
	assert.equal(await page.$$eval('#ps-load [data-cpu]', (n) => n.length), 4, 'softnet rows for 4 CPUs');
});

test('legacy + Save & Apply rewrites rps_cpus and the page follows', { timeout: 60000 }, async () => {
	const before = Object.fromEntries(rxQueues('eth0').map((q) => [ q, readKnob('eth0', q, 'rps_cpus') ]));
	await page.selectOption('#ps-mode-select', 'legacy');
	await page.getByRole('button', { name: 'Save & Apply' }).click();
	await page.waitForFunction(() => document.querySelector('#ps-mode')?.textContent === 'legacy', null, { timeout: 20000 });
	const afterMasks = Object.fromEntries(rxQueues('eth0').map((q) => [ q, readKnob('eth0', q, 'rps_cpus') ]));
	assert.notDeepEqual(afterMasks, before, 'legacy changed eth0\'s rps_cpus files');
	for (const q of Object.keys(afterMasks))
		assert.deepEqual(await pageRPS('eth0', q), maskCPUs(afterMasks[q]), `${q}: page shows the new mask ${afterMasks[q]}`);
	assert.match(await page.textContent('#ps-result-summary'), /^Mode legacy: [1-9]\d* changed/);
	assert.equal(await page.textContent('#ps-sync'), 'In sync');
	const conf = fs.readFileSync(path.join(dir, 'root', 'etc', 'config', 'packet_steering'), 'utf8');
	assert.match(conf, /option mode '?legacy'?/, 'the mode was saved');
	// The page's own Save & Apply replaces LuCI's footer (whose "Apply
	// unchecked" choice would mean nothing for set_mode); the success
	// notice is time-limited and goes away by itself.
	assert.equal(await page.$$eval('.cbi-page-actions button', (n) => n.length), 0, 'no footer buttons');
	assert.ok(await page.isVisible('#maincontent > .alert-message.time-limited'), 'success notice shown');
	await page.waitForFunction(() => !document.querySelector('#maincontent > .alert-message.time-limited'), null, { timeout: 10000 });
	await dismissNotifications();
});

test('an invalid flows value shows an error and changes nothing', { timeout: 60000 }, async () => {
	const before = snapshotKnobs();
	for (const [ value, message ] of [
		[ '12abc', /Flows must be a whole number/ ],
		[ '-5', /Invalid argument/ ],
		[ '99999999999', /Invalid argument/ ]
	]) {
		const n = await page.$$eval('#maincontent > .alert-message.danger', (e) => e.length);
		await page.fill('#ps-flows', value);
		await page.getByRole('button', { name: 'Save & Apply' }).click();
		await page.waitForFunction((n) => document.querySelectorAll('#maincontent > .alert-message.danger').length > n, n, { timeout: 10000 });
		const text = await page.textContent('#maincontent > .alert-message.danger');
		assert.match(text, message, `flows ${value}`);
	}
	assert.deepEqual(snapshotKnobs(), before, 'no knob and no config file changed');
	assert.equal(await page.textContent('#ps-mode'), 'legacy');
	await page.getByRole('button', { name: 'Reset' }).click();
	assert.equal(await page.inputValue('#ps-flows'), '0');
	await dismissNotifications();
});

test('a knob changed behind the daemon\'s back is marked, and re-apply fixes it', { timeout: 60000 }, async () => {
	const q = 'rx-1';
	const planned = readKnob('eth0', q, 'rps_cpus');
	const foreign = maskCPUs(planned).length === 4 ? '1' : 'f';
	fs.writeFileSync(path.join(queueDir('eth0'), q, 'rps_cpus'), foreign + '\n');
	await page.waitForFunction(() => document.querySelector('#ps-sync')?.textContent === 'Out of sync', null, { timeout: 15000 });
	const diff = await page.$$eval(`[data-device="eth0"] .ps-cell.ps-diff`, (n) => n.map((c) => c.getAttribute('data-queue')));
	assert.ok(diff.length > 0 && diff.every((x) => x === q), `out-of-sync cells ${diff}, want only ${q}`);
	assert.deepEqual(await pageRPS('eth0', q), maskCPUs(foreign), 'the map shows the live mask');

	fs.mkdirSync(screenshots, { recursive: true });
	await page.screenshot({ path: path.join(screenshots, 'overview.png'), fullPage: true });
	// The README's picture is refreshed on request only, so a test run leaves
	// the work tree clean: UPDATE_DOCS=1 make test-browser.
	if (process.env.UPDATE_DOCS === '1') {
		fs.mkdirSync(path.dirname(readmePNG), { recursive: true });
		fs.copyFileSync(path.join(screenshots, 'overview.png'), readmePNG);
	}

	await page.getByRole('button', { name: 'Re-apply the configured plan' }).click();
	await page.waitForFunction(() => document.querySelector('#ps-sync')?.textContent === 'In sync', null, { timeout: 15000 });
	assert.equal(readKnob('eth0', q, 'rps_cpus'), planned, 'apply restored the planned mask');
	assert.equal(await page.$$eval('.ps-cell.ps-diff', (n) => n.length), 0);

	// Transmit steering has no cell of its own: a foreign XPS mask is named
	// under the device's map. Legacy leaves XPS alone; auto plans it here.
	await page.selectOption('#ps-mode-select', 'auto');
	await page.getByRole('button', { name: 'Save & Apply' }).click();
	await page.waitForFunction(() => document.querySelector('#ps-mode')?.textContent === 'auto', null, { timeout: 20000 });
	await dismissNotifications();
	const sid = await page.evaluate(() => L.env.sessionid);
	const reply = await (await fetch(url + 'ubus', {
		method: 'POST',
		body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'call',
			params: [ sid, 'packet_steering', 'get_queues', { device: 'eth0' } ] })
	})).json();
	const tx0 = reply.result[1].devices[0].tx.find((t) => t.queue === 'tx-0');
	assert.ok(tx0 && tx0.want_xps_cpus, `auto plans XPS of eth0 tx-0: ${JSON.stringify(tx0)}`);
	const xps = readKnob('eth0', 'tx-0', 'xps_cpus');
	fs.writeFileSync(path.join(queueDir('eth0'), 'tx-0', 'xps_cpus'), (maskCPUs(xps).length === 4 ? '1' : 'f') + '\n');
	await page.waitForSelector('[data-device="eth0"] .ps-xps-diff', { timeout: 15000 });
	assert.match(await page.textContent('[data-device="eth0"] .ps-xps-diff'), /tx-0 on CPUs/);
	assert.equal(await page.textContent('#ps-sync'), 'Out of sync');
	await page.getByRole('button', { name: 'Re-apply the configured plan' }).click();
	await page.waitForFunction(() => document.querySelector('#ps-sync')?.textContent === 'In sync', null, { timeout: 15000 });
	assert.equal(readKnob('eth0', 'tx-0', 'xps_cpus'), xps, 'apply restored the planned XPS mask');
	assert.equal(await page.$$eval('.ps-xps-diff', (n) => n.length), 0);

	// Adaptive (experimental) starts from the auto plan: the page shows
	// its section (no deviations yet); back in auto the section goes.
	assert.equal(await page.isVisible('#ps-adaptive h3'), false);
	await page.selectOption('#ps-mode-select', 'adaptive');
	await page.getByRole('button', { name: 'Save & Apply' }).click();
	await page.waitForFunction(() => document.querySelector('#ps-mode')?.textContent === 'adaptive', null, { timeout: 20000 });
	await dismissNotifications();
	assert.match(await page.textContent('#ps-adaptive h3'), /Adaptive steering \(experimental\)/);
	assert.match(await page.textContent('#ps-deviations'), /None/);
	assert.match(await page.textContent('#ps-adaptive-options'), /Options: the defaults/);
	assert.equal(await page.textContent('#ps-sync'), 'In sync');
	await page.selectOption('#ps-mode-select', 'auto');
	await page.getByRole('button', { name: 'Save & Apply' }).click();
	await page.waitForFunction(() => document.querySelector('#ps-mode')?.textContent === 'auto', null, { timeout: 20000 });
	await dismissNotifications();
	assert.equal(await page.isVisible('#ps-adaptive h3'), false);
	assert.deepEqual(consoleErrors, [], 'no console errors over the whole session');
});

test('a virtio-net guest: rx rows with rx threads, tx rows with tx threads', { timeout: 60000 }, async () => {
	const dirV = path.join(tmp, 'virtio');
	const { proc, url: urlV } = await runDemo(dirV, '--preset', 'virtio-4q', '--pps', '0');
	const pv = await context.newPage();
	pv.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
	pv.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`));
	try {
		await pv.goto(urlV);
		await pv.waitForSelector('[data-device="eth0"] .ps-colhead', { timeout: 20000 });
		const heads = await pv.$$eval('[data-device="eth0"] .ps-rowhead', (n) => n.map((e) => e.textContent));
		assert.equal(heads.length, 8, `rows ${heads}`);
		for (let i = 0; i < 4; i++) {
			// rx-i: its rx thread napi/eth0-(8193+i), never a napi/eth0-0.
			assert.match(heads[i], new RegExp(`^rx-${i}napi/eth0-${8193 + i} .*virtio0-input\\.${i}`));
			assert.match(heads[4 + i], new RegExp(`^tx-${i}napi/eth0-0 \\[\\d+\\] .*virtio0-output\\.${i}`));
			for (const [ q, kind ] of [ [ `rx-${i}`, 'napi' ], [ `tx-${i}`, 'napi' ], [ `tx-${i}`, 'xps' ], [ `tx-${i}`, 'irq' ] ]) {
				const cpus = await pv.$$eval(`[data-device="eth0"] .ps-cell[data-queue="${q}"]`, (cells, k) =>
					cells.filter((c) => c.querySelector(`[data-mark="${k}"]`)).map((c) => +c.getAttribute('data-cpu')), kind);
				assert.deepEqual(cpus, [ i ], `${q} ${kind} on CPU ${i}`);
			}
		}
		assert.equal(await pv.$$eval('.ps-cell.ps-diff', (n) => n.length), 0, 'in sync after the demo\'s apply');
	}
	finally {
		await pv.close();
		await stopDemo(proc);
	}
	assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('mt7621: one tx thread for 16 tx queues is one row', { timeout: 60000 }, async () => {
	const dirM = path.join(tmp, 'mt7621');
	const { proc, url: urlM } = await runDemo(dirM, '--preset', 'mt7621', '--pps', '0');
	const pm = await context.newPage();
	pm.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
	pm.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`));
	try {
		await pm.goto(urlM);
		await pm.waitForSelector('[data-device="eth0"] .ps-colhead', { timeout: 20000 });
		const heads = await pm.$$eval('[data-device="eth0"] .ps-rowhead', (n) => n.map((e) => e.textContent));
		assert.equal(heads.length, 2, `rows ${heads}`);
		assert.match(heads[0], /^rx-0napi\/mtk_eth-258 /);
		assert.match(heads[1], /^tx-0\.\.15napi\/mtk_eth-257 \[\d+\]/);
	}
	finally {
		await pm.close();
		await stopDemo(proc);
	}
	assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('a 48-CPU machine: 48 columns, masks with comma groups', { timeout: 90000 }, async () => {
	const dir48 = path.join(tmp, 'server48');
	const { proc, url: url48 } = await runDemo(dir48, '--preset', 'server-48', '--pps', '0');
	const p48 = await context.newPage();
	p48.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
	p48.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`));
	try {
		await p48.goto(url48);
		await p48.waitForSelector('[data-device="eth0"] .ps-colhead', { timeout: 20000 });
		assert.equal(await p48.$$eval('[data-device="eth0"] .ps-colhead', (n) => n.length), 48);
		assert.equal(await p48.$$eval('[data-device="eth0"] .ps-rowhead', (n) => n.length), 48);
		// One ring per CPU: ring i's NAPI thread on CPU i, also above CPU 31.
		for (const i of [ 0, 33, 47 ]) {
			const cpus = await p48.$$eval(`[data-device="eth0"] .ps-cell[data-queue="rx-${i}"]`, (cells) =>
				cells.filter((c) => c.querySelector('[data-mark="napi"]')).map((c) => +c.getAttribute('data-cpu')));
			assert.deepEqual(cpus, [ i ], `rx-${i} NAPI thread`);
		}
		// A foreign XPS mask above CPU 31, in the kernel's comma-group format.
		fs.writeFileSync(path.join(queueDir('eth0', path.join(dir48, 'root')), 'tx-40', 'xps_cpus'), '00000001,00000000\n');
		await p48.waitForSelector('[data-device="eth0"] .ps-xps-diff', { timeout: 15000 });
		assert.match(await p48.textContent('[data-device="eth0"] .ps-xps-diff'), /tx-40 on CPUs 32, planned 40/);
	}
	finally {
		await p48.close();
		await stopDemo(proc);
	}
	assert.deepEqual(consoleErrors, [], 'no console errors');
});

test('a read-only login sees the page but cannot change anything, and is told why', { timeout: 60000 }, async () => {
	const pr = await context.newPage();
	pr.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
	pr.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`));
	const before = snapshotKnobs();
	try {
		// The demo's read-only user (rpcd ACL: luci-app-packet-steering read).
		const res = await pr.goto(url + 'cgi-bin/luci/admin/network/packet_steering?user=viewer');
		assert.equal(res.status(), 200);
		await pr.waitForSelector('#ps-mode', { timeout: 20000 });
		assert.ok(await pr.isVisible('#ps-readonly'), 'the page says it is read-only');
		assert.match(await pr.textContent('#ps-readonly'), /Read-only: .*read access only/);
		for (const sel of [ '#ps-mode-select', '#ps-flows', '#ps-save', '#ps-reset', '#ps-apply-now' ])
			assert.ok(await pr.isDisabled(sel), `${sel} is disabled`);
		assert.equal(await pr.$$eval('.cbi-page-actions button:not([disabled])', (n) => n.length), 0, 'no enabled footer button');
		// It still reads: the map and the status are there.
		assert.ok((await pr.$$('[data-device="eth0"] .ps-colhead')).length === 4, 'map shown');
		// Clicking does nothing, and the session itself may not write.
		await pr.click('#ps-save', { force: true }).catch(() => {});
		await pr.click('#ps-apply-now', { force: true }).catch(() => {});
		const denied = await pr.evaluate(async () => {
			const r = await fetch(L.env.ubuspath.replace(/\/$/, ''), { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'call',
				params: [ L.env.sessionid, 'packet_steering', 'set_mode', { mode: 'off' } ] }) });
			return r.json();
		});
		assert.equal(denied.error && denied.error.code, -32002, `set_mode as the read-only session: ${JSON.stringify(denied)}`);
		await pr.waitForTimeout(500);
		assert.deepEqual(snapshotKnobs(), before, 'no knob and no config file changed');
		assert.equal(await pr.$$eval('#maincontent > .alert-message', (n) => n.length), 0, 'no notification');
	}
	finally {
		await pr.close();
	}
	assert.deepEqual(consoleErrors, [], 'no console errors');
});
