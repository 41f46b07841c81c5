'use strict';
'require view';
'require rpc';
'require ui';
'require poll';

/*
 * Packet Steering: where each device's receive work runs, why, and whether
 * the CPUs keep up; change the steering mode. Talks to the ubus object
 * packet_steering served by the packet-steering daemon.
 */

var callStatus = rpc.declare({
	object: 'packet_steering',
	method: 'status',
	expect: { '': {} },
	reject: true
});

var callGetQueues = rpc.declare({
	object: 'packet_steering',
	method: 'get_queues',
	params: [ 'device' ],
	expect: { devices: [] },
	reject: true
});

var callApply = rpc.declare({
	object: 'packet_steering',
	method: 'apply',
	params: [ 'reason', 'device', 'dry_run' ],
	expect: { '': {} },
	reject: true
});

var callSetMode = rpc.declare({
	object: 'packet_steering',
	method: 'set_mode',
	params: [ 'mode', 'flows', 'persist' ],
	expect: { '': {} },
	reject: true
});

var MODES = [ 'off', 'legacy', 'all', 'auto', 'custom', 'adaptive' ];

function modeText(mode) {
	switch (mode) {
	case 'off': return _('No steering: RPS and flow counts are 0 on every queue, NAPI threads may run on any CPU.');
	case 'legacy': return _('Exactly what OpenWrt\'s stock packet-steering script writes.');
	case 'all': return _('Like legacy, but RPS spreads each queue over all CPUs (stock mode 2).');
	case 'auto': return _('Legacy, changed only where a measured profile or the kernel\'s scaling guide knows better. Recommended.');
	case 'custom': return _('Auto, then the per-device overrides in /etc/config/packet_steering.');
	case 'adaptive': return _('Experimental: auto, then while traffic flows a queue moves off a CPU that cannot keep up to the least loaded one, and back when the load is gone.');
	}
	return '';
}

function sourceText(src) {
	switch (src) {
	case 'packet_steering': return _('set in /etc/config/packet_steering');
	case 'network': return _('set in network.globals (stock option)');
	case 'default': return _('default');
	case 'live': return _('live only, not saved');
	}
	return src || '';
}

/* A kernel hex mask ("f", "1,00000000") as a sorted list of CPU numbers. */
function cpusFromMask(mask) {
	var out = [];
	if (mask == null || mask === '')
		return out;
	var groups = String(mask).trim().split(',');
	for (var g = 0; g < groups.length; g++) {
		var word = parseInt(groups[groups.length - 1 - g], 16);
		if (isNaN(word))
			return out;
		for (var b = 0; b < 32; b++)
			if (Math.floor(word / Math.pow(2, b)) % 2)
				out.push(g * 32 + b);
	}
	return out.sort(function(a, b) { return a - b; });
}

/* A kernel cpu list ("0-3,5") as a sorted list of CPU numbers. */
function cpusFromList(list) {
	var out = [];
	if (list == null || list === '')
		return out;
	String(list).split(',').forEach(function(part) {
		var m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part);
		if (!m)
			return;
		for (var c = +m[1]; c <= +(m[2] != null ? m[2] : m[1]); c++)
			out.push(c);
	});
	return out.sort(function(a, b) { return a - b; });
}

function cpuListText(cpus) {
	if (!cpus.length)
		return _('none');
	var parts = [], start = cpus[0], prev = cpus[0];
	for (var i = 1; i <= cpus.length; i++) {
		if (i < cpus.length && cpus[i] == prev + 1) {
			prev = cpus[i];
			continue;
		}
		parts.push(start == prev ? String(start) : start + '-' + prev);
		if (i < cpus.length)
			start = prev = cpus[i];
	}
	return parts.join(',');
}

function sameSet(a, b) {
	return a.length == b.length && a.every(function(v, i) { return v === b[i]; });
}

function fmtInt(n) {
	return String(Math.round(+n || 0)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function fmtRate(r) {
	if (r >= 1e6)
		return '%.1fM/s'.format(r / 1e6);
	if (r >= 1e3)
		return '%.1fk/s'.format(r / 1e3);
	return '%d/s'.format(r);
}

function fmtTime(t) {
	if (t == null || t === '')
		return '';
	var d = (typeof(t) == 'number') ? new Date(t * 1000) : new Date(t);
	return isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}

/* The first line of an error: LuCI appends a stack trace to RPC errors. */
function errText(err) {
	return String((err && err.message) ? err.message : err).split(/\n/)[0];
}

function notifyError(title, err) {
	ui.addNotification(null, E('p', {}, [ title + ' ' + errText(err) ]), 'danger');
}

function replace(node, children) {
	while (node.firstChild)
		node.removeChild(node.firstChild);
	(Array.isArray(children) ? children : [ children ]).forEach(function(c) {
		if (c != null && c !== '')
			node.appendChild(c);
	});
}

/* A mark: the CPUs a knob holds live and the ones the plan wants. A knob
 * the plan does not manage (empty wanted value) is wanted as it is. */
function mark(kind, live, want, parse) {
	var l = parse(live);
	return { kind: kind, live: l, want: (want != null && want !== '') ? parse(want) : l };
}

/* Which marks an rx queue puts on a CPU: its RPS targets, its rx NAPI
 * thread, its IRQ. */
function queueMarks(rx) {
	var marks = [ mark('rps', rx.rps_cpus, rx.want_rps_cpus, cpusFromMask) ];
	if (rx.napi)
		marks.push(mark('napi', rx.napi.cpus, rx.napi.want_cpus, cpusFromList));
	if (rx.irq)
		marks.push(mark('irq', rx.irq.cpus, rx.irq.want_cpus, cpusFromList));
	return marks;
}

/* The IRQ a tx queue has of its own: not one its rx queue shows already (a
 * "TxRx" vector serves both). */
function txOwnIRQ(dev, tx) {
	if (!tx.irq)
		return null;
	var shared = (dev.rx || []).some(function(rx) { return rx.irq && rx.irq.irq == tx.irq.irq; });
	return shared ? null : tx.irq;
}

/* A tx queue gets a row in the map when a thread or an IRQ of its own
 * completes its transmits. */
function hasTxRow(dev, tx) {
	return !!(tx.napi || txOwnIRQ(dev, tx));
}

/* Which marks a tx queue puts on a CPU: the CPUs XPS sends it from, its
 * tx-completion NAPI thread, its own IRQ. */
function txMarks(dev, tx) {
	var marks = [ mark('xps', tx.xps_cpus, tx.want_xps_cpus, cpusFromMask) ];
	if (tx.napi)
		marks.push(mark('napi', tx.napi.cpus, tx.napi.want_cpus, cpusFromList));
	var irq = txOwnIRQ(dev, tx);
	if (irq)
		marks.push(mark('irq', irq.cpus, irq.want_cpus, cpusFromList));
	return marks;
}

function deviceDiffs(dev) {
	var n = 0;
	var count = function(m) {
		if (!sameSet(m.live, m.want))
			n++;
	};
	(dev.rx || []).forEach(function(rx) { queueMarks(rx).forEach(count); });
	(dev.tx || []).forEach(function(tx) { txMarks(dev, tx).forEach(count); });
	return n;
}

/* A device is worth a map when a queue has a NAPI thread, an IRQ or an RPS
 * mask, live or wanted. */
function isSteered(dev) {
	return (dev.rx || []).some(function(rx) {
		return rx.napi || rx.irq || cpusFromMask(rx.rps_cpus).length || cpusFromMask(rx.want_rps_cpus).length;
	}) || (dev.tx || []).some(function(tx) { return hasTxRow(dev, tx); });
}

var MARK_LETTER = { irq: 'I', napi: 'N', rps: 'R', xps: 'X' };

function markTitle(kind) {
	switch (kind) {
	case 'irq': return _('IRQ');
	case 'napi': return _('NAPI thread');
	case 'rps': return _('RPS target');
	case 'xps': return _('XPS: sends from');
	}
	return kind;
}

var CSS = [
	'.ps-tiles { display:grid; grid-template-columns:repeat(auto-fit, minmax(210px, 1fr)); gap:10px; }',
	'.ps-tile { border:1px solid #dde3ea; border-radius:6px; padding:10px 12px; background:#fafbfc; }',
	'.ps-tile-label { font-size:11px; text-transform:uppercase; letter-spacing:.04em; color:#66788a; }',
	'.ps-tile-value { font-size:20px; font-weight:600; margin:2px 0; word-break:break-word; }',
	'.ps-tile-sub { font-size:12px; color:#52606d; }',
	'.ps-ok { color:#12805c; } .ps-bad { color:#c62828; }',
	'.ps-badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; background:#e5e9ee; }',
	'.ps-badge.ps-ok { background:#dff3e8; } .ps-badge.ps-bad { background:#fde2e2; }',
	'.ps-evidence { margin-top:10px; font-size:13px; color:#3e4c59; }',
	'.ps-legend { display:flex; flex-wrap:wrap; gap:14px; align-items:center; font-size:12px; color:#52606d; margin:0 0 10px; }',
	'.ps-legend span { display:inline-flex; align-items:center; gap:5px; }',
	'.ps-dev { margin:12px 0 18px; }',
	'.ps-dev-head { display:flex; gap:10px; align-items:baseline; margin-bottom:6px; }',
	'.ps-dev-name { font-weight:600; font-size:15px; }',
	'.ps-dev-meta { color:#66788a; font-size:12px; }',
	'.ps-grid-wrap { overflow-x:auto; }',
	'.ps-grid { display:grid; gap:4px; align-items:stretch; }',
	'.ps-grid-dense { gap:2px; } .ps-grid-dense .ps-cell { flex-wrap:wrap; gap:1px; min-height:28px; } .ps-grid-dense .ps-mark { width:13px; height:13px; font-size:9px; border-width:1px; }',
	'.ps-colhead { text-align:center; font-size:12px; font-weight:600; color:#3e4c59; padding:2px 0; }',
	'.ps-rowhead { font-size:12px; padding:4px 6px; line-height:1.25; }',
	'.ps-rowhead b { font-size:13px; }',
	'.ps-rowhead small { display:block; color:#66788a; }',
	'.ps-cell { display:flex; gap:4px; justify-content:center; align-items:center; min-height:34px; border-radius:5px; background:#f3f5f8; border:1px solid #e4e9ee; position:relative; }',
	'.ps-cell.ps-diff { background:#fff1f1; border:2px solid #dc2626; }',
	'.ps-cell.ps-diff::after { content:"\\2260"; position:absolute; top:-1px; right:3px; font-size:11px; color:#dc2626; font-weight:700; }',
	'.ps-mark { display:inline-flex; width:22px; height:20px; align-items:center; justify-content:center; border-radius:4px; font-size:11px; font-weight:700; color:#fff; border:2px solid transparent; }',
	'.ps-mark-irq { background:#d97706; } .ps-mark-napi { background:#2563eb; } .ps-mark-rps { background:#059669; } .ps-mark-xps { background:#7c3aed; }',
	'.ps-mark.ps-add { background:#fff; border-style:dashed; }',
	'.ps-mark-irq.ps-add { color:#d97706; border-color:#d97706; } .ps-mark-napi.ps-add { color:#2563eb; border-color:#2563eb; } .ps-mark-rps.ps-add { color:#059669; border-color:#059669; } .ps-mark-xps.ps-add { color:#7c3aed; border-color:#7c3aed; }',
	'.ps-mark.ps-drop { opacity:.55; text-decoration:line-through; border-color:#dc2626; }',
	'.ps-quiet { color:#66788a; font-size:12px; }',
	'.ps-xps-diff { color:#c62828; font-size:12px; margin:6px 0 0; }',
	'.ps-load { display:grid; grid-template-columns:64px minmax(160px, 1fr) 170px 110px 110px; gap:6px 12px; align-items:center; }',
	'.ps-load-head { font-size:11px; text-transform:uppercase; letter-spacing:.04em; color:#66788a; }',
	'.ps-bar { height:16px; background:#e5e9ee; border-radius:4px; overflow:hidden; position:relative; }',
	'.ps-bar > div { height:100%; background:#3b82f6; }',
	'.ps-bar-label { font-size:12px; color:#3e4c59; }',
	'.ps-spark { display:flex; align-items:flex-end; gap:1px; height:24px; border-bottom:1px solid #cfd8e0; }',
	'.ps-spark > div { flex:1; background:#60a5fa; min-height:1px; }',
	'.ps-num-bad { color:#c62828; font-weight:600; }',
	'.ps-hints { margin:0; padding-left:18px; } .ps-hints li { margin:4px 0; }',
	'.ps-deviated { border-left:3px solid #d08a00; } .ps-adaptive-mark { color:#a06600; display:block; }',
	'.ps-modes { margin:6px 0 0; padding:0; list-style:none; font-size:13px; }',
	'.ps-modes li { padding:3px 8px; border-radius:4px; color:#52606d; }',
	'.ps-modes li.ps-selected { background:#e7f1fb; color:#1f2933; }',
	'.ps-modes b { display:inline-block; width:72px; }',
	'.ps-result table { margin-top:6px; }',
	'.ps-arrow { color:#66788a; padding:0 4px; }'
].join('\n');

return view.extend({
	load: function() {
		return Promise.all([ callStatus(), callGetQueues() ]).catch(function(err) {
			return [ null, null, err ];
		});
	},

	render: function(data) {
		var self = this;

		/* A session that may read but not write packet_steering (rpcd ACL
		 * read only): LuCI marks the view read-only; the page's own
		 * controls are disabled too, and the page says why. */
		this.readonly = (L.hasViewPermission() === false);
		this.status = data[0];
		this.devices = data[1] || [];
		this.lastResult = null;
		this.samples = [];
		this.failing = false;

		this.statusNode = E('div', { 'class': 'cbi-section', 'id': 'ps-status' });
		this.mapNode = E('div', { 'class': 'cbi-section', 'id': 'ps-map' });
		this.loadNode = E('div', { 'class': 'cbi-section', 'id': 'ps-load' });
		this.hintsNode = E('div', { 'class': 'cbi-section', 'id': 'ps-hints' });
		this.adaptiveNode = E('div', { 'class': 'cbi-section', 'id': 'ps-adaptive' });
		this.resultNode = E('div', { 'class': 'cbi-section ps-result', 'id': 'ps-result' });

		this.modeSelect = E('select', {
			'id': 'ps-mode-select',
			'change': function() { self.updateModeList(); }
		}, MODES.map(function(m) {
			return E('option', { 'value': m }, [ m ]);
		}));
		this.modeList = E('ul', { 'class': 'ps-modes' }, MODES.map(function(m) {
			return E('li', { 'data-mode': m }, [ E('b', {}, [ m ]), modeText(m) ]);
		}));
		this.flowsInput = E('input', {
			'id': 'ps-flows',
			'type': 'text',
			'inputmode': 'numeric',
			'size': '8',
			'placeholder': '0'
		});

		var settings = E('div', { 'class': 'cbi-section', 'id': 'ps-settings' }, [
			E('h3', {}, [ _('Mode') ]),
			E('div', { 'class': 'cbi-value' }, [
				E('label', { 'class': 'cbi-value-title', 'for': 'ps-mode-select' }, [ _('Steering mode') ]),
				E('div', { 'class': 'cbi-value-field' }, [ this.modeSelect, this.modeList ])
			]),
			E('div', { 'class': 'cbi-value' }, [
				E('label', { 'class': 'cbi-value-title', 'for': 'ps-flows' }, [ _('Flows') ]),
				E('div', { 'class': 'cbi-value-field' }, [
					this.flowsInput,
					E('div', { 'class': 'cbi-value-description' }, [
						_('RFS flow entries per rx queue (rps_flow_cnt); 0 turns RFS off. A non-zero value also raises net.core.rps_sock_flow_entries.')
					])
				])
			]),
			E('div', { 'class': 'cbi-value' }, [
				E('span', { 'class': 'cbi-value-title' }, [ _('Change') ]),
				E('div', { 'class': 'cbi-value-field' }, [
					E('button', {
						'class': 'cbi-button cbi-button-apply',
						'id': 'ps-save',
						'click': ui.createHandlerFn(this, 'handleSetMode')
					}, [ _('Save & Apply') ]),
					' ',
					E('button', {
						'class': 'cbi-button cbi-button-reset',
						'id': 'ps-reset',
						'click': ui.createHandlerFn(this, 'handleResetForm')
					}, [ _('Reset') ]),
					E('div', { 'class': 'cbi-value-description' }, [
						_('Saves the mode and flows to /etc/config/packet_steering and applies them at once (set_mode). The change is applied by packet-steering, not by LuCI\'s configuration rollback.')
					])
				])
			]),
			E('div', { 'class': 'cbi-value' }, [
				E('span', { 'class': 'cbi-value-title' }, [ _('Apply now') ]),
				E('div', { 'class': 'cbi-value-field' }, [
					E('button', {
						'class': 'cbi-button cbi-button-action',
						'id': 'ps-apply-now',
						'click': ui.createHandlerFn(this, 'handleApplyNow')
					}, [ _('Re-apply the configured plan') ]),
					E('div', { 'class': 'cbi-value-description' }, [
						_('Writes what differs from the plan without changing the mode.')
					])
				])
			])
		]);
		if (this.readonly) {
			settings.insertBefore(E('div', { 'class': 'alert-message notice', 'id': 'ps-readonly' }, [
				_('Read-only: your login may view packet steering but not change it (its access list grants luci-app-packet-steering read access only). The mode, flows and buttons are disabled.')
			]), settings.firstElementChild.nextSibling);
			settings.querySelectorAll('select, input, button').forEach(function(n) {
				n.disabled = true;
			});
		}

		this.resetForm();
		this.updateAll();

		if (data[2])
			this.reportFailure(_('Could not read the packet steering state:'), data[2]);

		poll.add(function() { return self.refresh(); }, 5);

		return E('div', { 'class': 'ps-page' }, [
			E('style', {}, [ CSS ]),
			E('h2', {}, [ _('Packet Steering') ]),
			E('div', { 'class': 'cbi-map-descr' }, [
				_('Where the kernel\'s receive work runs: for each rx queue, the CPU of its interrupt, of its NAPI thread, and the CPUs RPS hands packets to; compared with the plan of the chosen mode.')
			]),
			this.statusNode,
			this.adaptiveNode,
			this.mapNode,
			this.loadNode,
			this.hintsNode,
			settings,
			this.resultNode
		]);
	},

	reportFailure: function(title, err) {
		if (!this.failing)
			notifyError(title, err);
		this.failing = true;
	},

	refresh: function() {
		var self = this;
		return Promise.all([ callStatus(), callGetQueues() ]).then(function(res) {
			self.status = res[0];
			self.devices = res[1];
			self.failing = false;
			self.updateAll();
		}).catch(function(err) {
			self.reportFailure(_('Could not read the packet steering state:'), err);
		});
	},

	resetForm: function() {
		var st = this.status || {};
		var conf = st.configured || {};
		this.modeSelect.value = (MODES.indexOf(conf.mode) >= 0) ? conf.mode : ((MODES.indexOf(st.mode) >= 0) ? st.mode : 'auto');
		this.flowsInput.value = (conf.flows != null) ? String(conf.flows) : '';
		this.updateModeList();
	},

	updateModeList: function() {
		var sel = this.modeSelect.value;
		Array.prototype.forEach.call(this.modeList.children, function(li) {
			li.classList.toggle('ps-selected', li.getAttribute('data-mode') == sel);
		});
	},

	updateAll: function() {
		var st = this.status;
		if (st && Array.isArray(st.cpus)) {
			this.samples.push({ t: Date.now(), cpus: st.cpus });
			if (this.samples.length > 31)
				this.samples.shift();
		}
		this.renderStatus();
		this.renderAdaptive();
		this.renderMap();
		this.renderLoad();
		this.renderHints();
		this.renderResult();
	},

	cpuCount: function() {
		var st = this.status || {};
		var n = (st.platform && st.platform.cpus) || (Array.isArray(st.cpus) ? st.cpus.length : 0);
		return Math.max(n, 1);
	},

	renderStatus: function() {
		var st = this.status;
		if (!st) {
			replace(this.statusNode, [ E('h3', {}, [ _('Status') ]), E('p', { 'class': 'ps-quiet' }, [ _('No data from the packet_steering service.') ]) ]);
			return;
		}
		var conf = st.configured || {}, plat = st.platform || {}, la = st.last_apply;
		var diffs = 0;
		(this.devices || []).forEach(function(d) { diffs += deviceDiffs(d); });

		var tiles = [
			E('div', { 'class': 'ps-tile' }, [
				E('div', { 'class': 'ps-tile-label' }, [ _('Effective mode') ]),
				E('div', { 'class': 'ps-tile-value', 'id': 'ps-mode' }, [ st.mode || '?' ]),
				E('div', { 'class': 'ps-tile-sub' }, [
					_('configured: %s, flows %d, %s').format(conf.mode || '?', conf.flows || 0, sourceText(conf.source))
				])
			]),
			E('div', { 'class': 'ps-tile' }, [
				E('div', { 'class': 'ps-tile-label' }, [ _('Policy') ]),
				E('div', { 'class': 'ps-tile-value', 'id': 'ps-policy' }, [ st.policy || '?' ]),
				E('div', { 'class': 'ps-tile-sub' }, [ _('the rule set that decided the plan') ])
			]),
			E('div', { 'class': 'ps-tile' }, [
				E('div', { 'class': 'ps-tile-label' }, [ _('Router') ]),
				E('div', { 'class': 'ps-tile-value' }, [ plat.model || plat.board || '?' ]),
				E('div', { 'class': 'ps-tile-sub' }, [
					_('%s, %d CPUs, flow offload: %s').format(plat.target || plat.board || '?', this.cpuCount(), st.offload || '?')
				])
			]),
			E('div', { 'class': 'ps-tile' }, [
				E('div', { 'class': 'ps-tile-label' }, [ _('Live state') ]),
				E('div', { 'class': 'ps-tile-value ' + (st.in_sync ? 'ps-ok' : 'ps-bad'), 'id': 'ps-sync' }, [
					st.in_sync ? _('In sync') : _('Out of sync')
				]),
				E('div', { 'class': 'ps-tile-sub' }, [
					st.in_sync ? _('every knob holds the planned value')
						: (diffs ? _('differences from the plan: %d, framed in red in the map').format(diffs)
							: _('a knob outside the map (such as a sysctl) differs; re-apply writes the plan'))
				])
			]),
			E('div', { 'class': 'ps-tile' }, [
				E('div', { 'class': 'ps-tile-label' }, [ _('Last apply') ]),
				E('div', { 'class': 'ps-tile-value', 'id': 'ps-last-apply' }, [
					la ? _('%d changed, %d failed').format(la.changed || 0, la.failed || 0) : _('none yet')
				]),
				E('div', { 'class': 'ps-tile-sub' }, [
					la ? _('%s, %s, %.1f ms').format(fmtTime(la.time), la.reason || _('no reason given'), (la.duration_us || 0) / 1000) : ''
				])
			])
		];

		var children = [ E('h3', {}, [ _('Status') ]), E('div', { 'class': 'ps-tiles' }, tiles) ];
		if (st.evidence)
			children.push(E('div', { 'class': 'ps-evidence', 'id': 'ps-evidence' }, [
				E('strong', {}, [ _('Why this policy: ') ]), st.evidence
			]));
		(st.config_errors || []).forEach(function(g) {
			children.push(E('div', { 'class': 'alert-message warning' }, [
				_('Configuration file %s does not parse; the last good state is kept: %s').format(g.path, g.error)
			]));
		});
		replace(this.statusNode, children);
	},

	renderAdaptive: function() {
		var st = this.status, ad = st && st.adaptive;
		if (!ad) {
			replace(this.adaptiveNode, []);
			this.adaptiveNode.style.display = 'none';
			return;
		}
		this.adaptiveNode.style.display = '';
		var smp = ad.sampling;
		var loop = (smp && smp.running)
			? _('Sampling every %.1f s (%s); %d samples, %d full.').format((smp.interval_ms || 0) / 1000,
				smp.active ? _('traffic: %s packets/s').format(fmtInt(Math.round(smp.pps || 0))) : _('no traffic'),
				smp.wakeups || 0, smp.full_samples || 0)
			: _('The control loop is not running.');
		var children = [
			E('h3', {}, [ _('Adaptive steering (experimental)') ]),
			E('p', { 'class': 'ps-quiet', 'id': 'ps-adaptive-loop' }, [ loop ])
		];
		if (smp && Array.isArray(smp.loads) && smp.loads.length)
			children.push(E('p', { 'class': 'ps-quiet' }, [ smp.loads.map(function(l) {
				return _('CPU %d: net %d%%, busy %d%%').format(l.cpu, Math.round(l.net * 100), Math.round(l.busy * 100)) +
					(l.saturated ? ' (' + _('saturated: %s').format(l.saturated) + ')' : '');
			}).join(' \u00b7 ') ]));
		// The loop's options: those set in the config adaptive section
		// (edited in the file or with uci; no fields here).
		var set = (ad.config || []).filter(function(o) { return o.source != 'default'; });
		children.push(E('p', { 'class': 'ps-quiet', 'id': 'ps-adaptive-options' }, [ set.length
			? _('Options set in /etc/config/packet_steering (config adaptive): %s; the others are the defaults.').format(
				set.map(function(o) { return o.name + ' ' + o.value; }).join(', '))
			: _('Options: the defaults (set them in a config adaptive section of /etc/config/packet_steering).') ]));
		if (ad.state_file)
			children.push(E('p', { 'class': 'ps-bad' }, [ _('State file: %s').format(ad.state_file) ]));
		var devs = ad.deviations || [];
		children.push(E('h4', {}, [ _('Deviations from the auto plan') ]));
		if (!devs.length)
			children.push(E('p', { 'class': 'ps-quiet', 'id': 'ps-deviations' }, [ _('None: every queue is where auto puts it.') ]));
		else
			children.push(E('ul', { 'id': 'ps-deviations' }, devs.map(function(d) {
				return E('li', { 'data-queue': d.device + '/' + d.queue }, [
					E('b', {}, [ d.device + ' ' + d.queue ]), ' ',
					_('%s on CPU %d instead of CPU %d since %s: %s').format(d.kind == 'rps' ? _('RPS') : _('NAPI thread'), d.cpu, d.auto_cpu, fmtTime(d.since), d.reason)
				]);
			})));
		if ((ad.dropped || []).length)
			children.push(E('ul', { 'id': 'ps-dropped' }, ad.dropped.map(function(d) {
				return E('li', {}, [ _('Dropped %s %s (CPU %d): %s').format(d.device, d.queue, d.cpu, d.why) ]);
			})));
		var moves = (ad.moves || []).slice().reverse();
		children.push(E('h4', {}, [ _('Recent moves') ]));
		if (!moves.length)
			children.push(E('p', { 'class': 'ps-quiet', 'id': 'ps-moves' }, [ _('No moves yet.') ]));
		else
			children.push(E('ul', { 'id': 'ps-moves' }, moves.map(function(m) {
				return E('li', {}, [
					fmtTime(m.time), ' ', E('b', {}, [ m.device + ' ' + m.queue ]), ' ',
					_('CPU %d \u2192 CPU %d: %s').format(m.from, m.to, m.reason),
					m.error ? E('span', { 'class': 'ps-bad' }, [ ' ' + _('(failed: %s)').format(m.error) ]) : ''
				]);
			})));
		replace(this.adaptiveNode, children);
	},

	renderMap: function() {
		var n = this.cpuCount();
		var devs = (this.devices || []).filter(isSteered);
		var quiet = (this.devices || []).filter(function(d) { return !isSteered(d); });

		var children = [
			E('h3', {}, [ _('Where receive work runs') ]),
			E('div', { 'class': 'cbi-section-descr' }, [
				_('One row per rx queue (its NAPI thread, IRQ and RPS targets), then one per tx queue that has a transmit-completion NAPI thread or IRQ of its own (with the CPUs XPS sends it from); one column per CPU. A solid mark is live and planned; a dashed mark is planned but not live yet; a struck-out mark is live but not planned. Cells that differ from the plan are framed in red.')
			]),
			E('div', { 'class': 'ps-legend' }, [
				E('span', {}, [ E('span', { 'class': 'ps-mark ps-mark-irq' }, [ 'I' ]), _('interrupt (IRQ affinity)') ]),
				E('span', {}, [ E('span', { 'class': 'ps-mark ps-mark-napi' }, [ 'N' ]), _('NAPI thread (rx rows: receive; tx rows: transmit completion)') ]),
				E('span', {}, [ E('span', { 'class': 'ps-mark ps-mark-rps' }, [ 'R' ]), _('RPS target') ]),
				E('span', {}, [ E('span', { 'class': 'ps-mark ps-mark-xps' }, [ 'X' ]), _('XPS (tx rows)') ]),
				E('span', {}, [ E('span', { 'class': 'ps-mark ps-mark-rps ps-add' }, [ 'R' ]), _('planned, not live') ]),
				E('span', {}, [ E('span', { 'class': 'ps-mark ps-mark-rps ps-drop' }, [ 'R' ]), _('live, not planned') ])
			])
		];

		if (!devs.length)
			children.push(E('p', { 'class': 'ps-quiet' }, [ _('No device has a NAPI thread, an IRQ or an RPS mask to show.') ]));

		devs.forEach(function(dev) {
			var cols = 'minmax(%dpx, 1.4fr) repeat(%d, minmax(%dpx, 1fr))'.format(n > 16 ? 130 : 150, n, n > 32 ? 18 : (n > 16 ? 22 : (n > 8 ? 44 : 76)));
			var cells = [ E('div', {}, []) ];
			for (var c = 0; c < n; c++)
				cells.push(E('div', { 'class': 'ps-colhead', 'data-cpu': String(c), 'title': _('CPU %d').format(c) }, [
					n > 16 ? String(c) : _('CPU %d').format(c)
				]));

			/* How the queue's thread and IRQ are known to serve it: the
			 * kernel's netlink map or an inference rule (get_queues source). */
			var pairedBy = function(q) {
				var s = [];
				[ q.napi, q.irq ].forEach(function(o) {
					if (o && o.source && s.indexOf(o.source) < 0)
						s.push(o.source);
				});
				return s.length ? _('paired by: %s').format(s.join(', ')) : '';
			};

			var row = function(queue, sub, marks, kinds, moved, paired) {
				var head = [
					E('b', {}, [ queue ]),
					E('small', paired ? { 'title': paired } : {}, [ sub.join(' \u00b7 ') || _('no NAPI thread or IRQ of its own') ])
				];
				if (moved)
					head.push(E('small', { 'class': 'ps-adaptive-mark', 'title': moved.reason || '' }, [
						_('adaptive: on CPU %d, auto: CPU %d').format(moved.cpu, moved.auto_cpu)
					]));
				cells.push(E('div', { 'class': 'ps-rowhead' + (moved ? ' ps-deviated' : ''), 'data-queue': queue }, head));
				for (var c = 0; c < n; c++) {
					var chips = [], diff = false, tips = [];
					kinds.forEach(function(kind) {
						var m = marks.filter(function(x) { return x.kind == kind; })[0];
						if (!m)
							return;
						var live = m.live.indexOf(c) >= 0, want = m.want.indexOf(c) >= 0;
						if (!live && !want)
							return;
						var state = (live && want) ? 'both' : (want ? 'add' : 'drop');
						if (state != 'both')
							diff = true;
						tips.push(_('%s: %s').format(markTitle(kind),
							state == 'both' ? _('live and planned') : (state == 'add' ? _('planned, not live') : _('live, not planned'))));
						chips.push(E('span', {
							'class': 'ps-mark ps-mark-' + kind + (state == 'add' ? ' ps-add' : (state == 'drop' ? ' ps-drop' : '')),
							'data-mark': kind,
							'data-state': state
						}, [ MARK_LETTER[kind] ]));
					});
					cells.push(E('div', {
						'class': 'ps-cell' + (diff ? ' ps-diff' : ''),
						'data-cpu': String(c),
						'data-queue': queue,
						'title': _('%s %s, CPU %d').format(dev.name, queue, c) + '\n' + (tips.join('\n') || _('nothing runs here for this queue'))
					}, chips));
				}
			};

			(dev.rx || []).forEach(function(rx) {
				var sub = [];
				if (rx.napi)
					sub.push(rx.napi.thread || _('pid %d').format(rx.napi.pid));
				if (rx.irq)
					sub.push(_('IRQ %d %s').format(rx.irq.irq, rx.irq.name || ''));
				if (rx.rps_flow_cnt)
					sub.push(_('%d flows').format(rx.rps_flow_cnt));
				row(rx.queue, sub, queueMarks(rx), [ 'irq', 'napi', 'rps' ], rx.adaptive, pairedBy(rx));
			});

			/* Tx queues completed by one thread (mtk_soc_eth has one for all
			 * 16) with the same XPS and no IRQ of their own share a row. */
			var txs = dev.tx || [];
			var sameTxRow = function(a, b) {
				return a.napi && b.napi && a.napi.pid == b.napi.pid && !txOwnIRQ(dev, a) && !txOwnIRQ(dev, b) &&
					a.xps_cpus == b.xps_cpus && (a.want_xps_cpus || '') == (b.want_xps_cpus || '');
			};
			for (var i = 0; i < txs.length; i++) {
				var tx = txs[i];
				if (!hasTxRow(dev, tx))
					continue;
				var j = i;
				while (j + 1 < txs.length && sameTxRow(txs[j + 1], tx))
					j++;
				var label = (j > i) ? tx.queue + '..' + txs[j].queue.replace(/^tx-/, '') : tx.queue;
				var sub = [];
				if (tx.napi)
					sub.push(_('%s [%d]').format(tx.napi.thread || '', tx.napi.pid));
				var irq = txOwnIRQ(dev, tx);
				if (irq)
					sub.push(_('IRQ %d %s').format(irq.irq, irq.name || ''));
				row(label, sub, txMarks(dev, tx), [ 'irq', 'napi', 'xps' ], null, pairedBy(tx));
				i = j;
			}

			var xpsDiff = (dev.tx || []).filter(function(tx) {
				return tx.want_xps_cpus != null && tx.want_xps_cpus !== '' &&
					!sameSet(cpusFromMask(tx.xps_cpus), cpusFromMask(tx.want_xps_cpus));
			});
			var threaded = (dev.rx || []).some(function(rx) { return rx.napi; }) || (dev.tx || []).some(function(tx) { return tx.napi; });
			var ndiff = deviceDiffs(dev);
			children.push(E('div', { 'class': 'ps-dev', 'data-device': dev.name }, [
				E('div', { 'class': 'ps-dev-head' }, [
					E('span', { 'class': 'ps-dev-name' }, [ dev.name ]),
					E('span', { 'class': 'ps-dev-meta' }, [
						[ dev.kind, dev.driver ? _('driver %s').format(dev.driver) : '',
							_('%d rx / %d tx queues').format((dev.rx || []).length, (dev.tx || []).length),
							threaded ? _('threaded NAPI') : '' ].filter(function(x) { return x; }).join(' \u00b7 ')
					]),
					E('span', { 'class': 'ps-badge ' + (ndiff ? 'ps-bad' : 'ps-ok') }, [
						ndiff ? _('%d out of sync').format(ndiff) : _('in sync')
					])
				]),
				E('div', { 'class': 'ps-grid-wrap' }, [
					E('div', { 'class': 'ps-grid' + (n > 8 ? ' ps-grid-dense' : ''), 'style': 'grid-template-columns:' + cols }, cells)
				]),
				xpsDiff.length ? E('p', { 'class': 'ps-xps-diff' }, [
					_('Transmit steering (XPS) differs from the plan: %s').format(xpsDiff.map(function(tx) {
						return _('%s on CPUs %s, planned %s').format(tx.queue,
							cpuListText(cpusFromMask(tx.xps_cpus)), cpuListText(cpusFromMask(tx.want_xps_cpus)));
					}).join('; '))
				]) : ''
			]));
		});

		if (quiet.length)
			children.push(E('p', { 'class': 'ps-quiet' }, [
				_('Not steered (no NAPI thread, IRQ or RPS mask): %s').format(quiet.map(function(d) { return d.name; }).join(', '))
			]));

		replace(this.mapNode, children);
	},

	renderLoad: function() {
		var s = this.samples, last = s.length ? s[s.length - 1].cpus : [];
		var maxProcessed = 0;
		last.forEach(function(c) { maxProcessed = Math.max(maxProcessed, +c.processed || 0); });

		var rows = [
			E('div', { 'class': 'ps-load-head' }, [ _('CPU') ]),
			E('div', { 'class': 'ps-load-head' }, [ _('Packets processed (total)') ]),
			E('div', { 'class': 'ps-load-head' }, [ _('Rate, last samples') ]),
			E('div', { 'class': 'ps-load-head' }, [ _('Dropped') ]),
			E('div', { 'class': 'ps-load-head' }, [ _('Squeezed') ])
		];

		last.forEach(function(c, idx) {
			var rates = [];
			for (var i = 1; i < s.length; i++) {
				var a = s[i - 1].cpus[idx], b = s[i].cpus[idx], dt = (s[i].t - s[i - 1].t) / 1000;
				if (a && b && dt > 0)
					rates.push(Math.max(0, (b.processed - a.processed) / dt));
			}
			var maxRate = Math.max.apply(null, [ 1 ].concat(rates));
			var pct = maxProcessed ? Math.round(100 * (+c.processed || 0) / maxProcessed) : 0;
			rows.push(
				E('div', { 'data-cpu': String(c.cpu) }, [ E('b', {}, [ _('CPU %d').format(c.cpu) ]) ]),
				E('div', {}, [
					E('div', { 'class': 'ps-bar' }, [ E('div', { 'style': 'width:%d%%'.format(pct) }) ]),
					E('div', { 'class': 'ps-bar-label' }, [ fmtInt(c.processed) ])
				]),
				E('div', {}, [
					rates.length ? E('div', { 'class': 'ps-spark', 'title': _('packets per second, one bar per refresh') },
						rates.map(function(r) { return E('div', { 'style': 'height:%d%%'.format(Math.round(100 * r / maxRate)) }); }))
						: E('span', { 'class': 'ps-quiet' }, [ _('collecting…') ]),
					E('div', { 'class': 'ps-bar-label' }, [ rates.length ? fmtRate(rates[rates.length - 1]) : '' ])
				]),
				E('div', { 'class': (+c.dropped > 0) ? 'ps-num-bad' : '' }, [ fmtInt(c.dropped) ]),
				E('div', { 'class': (+c.time_squeeze > 0) ? 'ps-num-bad' : '' }, [ fmtInt(c.time_squeeze) ])
			);
		});

		replace(this.loadNode, [
			E('h3', {}, [ _('Per-CPU receive load') ]),
			E('div', { 'class': 'cbi-section-descr' }, [
				_('From /proc/net/softnet_stat, refreshed every 5 seconds. Dropped: the backlog was full. Squeezed: the CPU ran out of budget and left work for later; both rising means the CPU is not keeping up.')
			]),
			last.length ? E('div', { 'class': 'ps-load' }, rows) : E('p', { 'class': 'ps-quiet' }, [ _('No softnet counters.') ])
		]);
	},

	renderHints: function() {
		var hints = (this.status && this.status.hints) || [];
		replace(this.hintsNode, [
			E('h3', {}, [ _('Hints') ]),
			hints.length ? E('ul', { 'class': 'ps-hints' }, hints.map(function(h) {
				return E('li', { 'data-hint': h.id || '' }, [
					h.device ? E('span', { 'class': 'ps-badge' }, [ h.device ]) : '',
					h.device ? ' ' : '',
					h.text || h.id || ''
				]);
			})) : E('p', { 'class': 'ps-quiet' }, [ _('Nothing fights the plan.') ])
		]);
	},

	renderResult: function() {
		var r = this.lastResult;
		if (!r) {
			replace(this.resultNode, [
				E('h3', {}, [ _('Result of the last change') ]),
				E('p', { 'class': 'ps-quiet' }, [ _('Nothing changed from this page yet.') ])
			]);
			return;
		}
		var changed = r.changed || [], failed = r.failed || [];
		var target = function(a) {
			return [ a.device, a.queue, a.thread, a.name || (a.irq ? 'IRQ ' + a.irq : ''), a.key ].filter(function(x) { return x; }).join(' ');
		};
		var children = [
			E('h3', {}, [ _('Result of the last change') ]),
			E('p', { 'id': 'ps-result-summary' }, [
				_('%s: %d changed, %d already right, %d failed, %.1f ms.').format(
					r.mode ? _('Mode %s').format(r.mode) : _('Apply'), changed.length, r.unchanged || 0, failed.length, (r.duration_us || 0) / 1000)
			])
		];
		if (changed.length)
			children.push(E('table', { 'class': 'table' }, [
				E('tr', {}, [ E('th', {}, [ _('Knob') ]), E('th', {}, [ _('Target') ]), E('th', {}, [ _('Change') ]) ])
			].concat(changed.map(function(a) {
				return E('tr', {}, [
					E('td', {}, [ a.kind ]),
					E('td', {}, [ target(a) ]),
					E('td', {}, [ a.current || '\u2205', E('span', { 'class': 'ps-arrow' }, [ '\u2192' ]), a.value ])
				]);
			}))));
		failed.forEach(function(f) {
			children.push(E('div', { 'class': 'alert-message danger' }, [
				_('Could not write %s %s: %s').format((f.action || {}).kind || '?', target(f.action || {}), f.error || '?')
			]));
		});
		replace(this.resultNode, children);
	},

	showResult: function(res) {
		this.lastResult = res || {};
		var failed = (this.lastResult.failed || []).length;
		var msg = E('p', {}, [
			_('%s: %d changed, %d failed.').format(
				this.lastResult.mode ? _('Mode %s applied').format(this.lastResult.mode) : _('Plan applied'),
				(this.lastResult.changed || []).length, failed)
		]);
		/* Successes fade out so they do not pile up; failures stay. */
		if (failed)
			ui.addNotification(null, msg, 'warning');
		else if (typeof(ui.addTimeLimitedNotification) == 'function')
			ui.addTimeLimitedNotification(null, msg, 5000, 'info');
		else
			ui.addNotification(null, msg, 'info');
		return this.refresh();
	},

	handleApplyNow: function(ev) {
		var self = this;
		if (this.readonly)
			return Promise.resolve();
		return callApply(_('LuCI: apply now')).then(function(res) {
			return self.showResult(res);
		}).catch(function(err) {
			notifyError(_('Could not apply the plan:'), err);
		});
	},

	/* The page's own Save & Apply (set_mode). LuCI's footer (Save & Apply
	 * with its "Apply unchecked" choice, Save, Reset) is left out: it
	 * applies UCI changes with LuCI's rollback check, which set_mode does
	 * not go through, so its choices would mean nothing here. */
	handleSaveApply: null,
	handleSave: null,
	handleReset: null,

	handleSetMode: function(ev) {
		var self = this;
		if (this.readonly)
			return Promise.resolve();
		var m = this.modeSelect.value;
		var text = this.flowsInput.value.trim();
		var flows;

		if (MODES.indexOf(m) < 0) {
			ui.addNotification(null, E('p', {}, [ _('Unknown mode %s.').format(m) ]), 'danger');
			return Promise.resolve();
		}
		if (text !== '') {
			if (!/^-?\d+$/.test(text)) {
				ui.addNotification(null, E('p', {}, [
					_('Flows must be a whole number (0 turns RFS off), not "%s". Nothing was changed.').format(text)
				]), 'danger');
				return Promise.resolve();
			}
			flows = parseInt(text, 10);
		}

		return callSetMode(m, flows, true).then(function(res) {
			return self.showResult(res);
		}).catch(function(err) {
			notifyError(_('Could not change the mode; nothing was changed:'), err);
		});
	},

	handleResetForm: function(ev) {
		this.resetForm();
	}
});
