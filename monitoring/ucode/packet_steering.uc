// packet_steering: a collector for prometheus-node-exporter-ucode
// (/usr/share/ucode/node-exporter/lib/packet_steering.uc), the same
// metrics as the Lua collector (monitoring/lua/packet_steering.lua; see
// docs/monitoring.md): per-CPU softnet counters from /proc/net/softnet_stat
// with node_exporter's names, and the steering state from the
// packet_steering ubus object on a connection of its own with a timeout (one
// call, status with queues, which the daemon answers from one read of the
// machine), so that a missing object or a slow daemon gives
// packet_steering_up 0.
//
// PACKET_STEERING_ROOT (default /) prefixes the /proc paths and
// PACKET_STEERING_UBUS_SOCKET names the ubus socket (tests).

let root = getenv("PACKET_STEERING_ROOT") || "/";
if (substr(root, -1) != "/")
	root += "/";

// Seconds each ubus call may take (the connection's timeout).
const timeout = 2;

// The families of this scrape in declaration order, written at the end,
// each as one group (queues add to several families in turn).
let families = [];

function family(name, mtype, help) {
	let f = { name, mtype, help, samples: [] };
	push(families, f);
	return function(labels, value) {
		if (value == null)
			return;
		push(f.samples, [ labels, value ]);
	};
}

function flush() {
	for (let f in families) {
		if (!length(f.samples))
			continue;
		let add = (f.mtype == "counter") ? counter(f.name, f.help) : gauge(f.name, f.help);
		for (let s in f.samples)
			add(s[0], s[1]);
	}
}

function readfile(path) {
	let f = fs.open(path);
	if (!f)
		return null;
	let s = f.read("all");
	f.close();
	return s;
}

function softnet() {
	let s = readfile(root + "proc/net/softnet_stat");
	if (s == null)
		return;
	let rows = [];
	let i = 0;
	for (let line in split(s, "\n")) {
		if (line == "")
			continue;
		let c = [];
		for (let f in split(trim(line), /\s+/)) {
			if (!match(f, /^[0-9a-fA-F]+$/)) {
				c = null;
				break;
			}
			push(c, hex(f));
		}
		if (c && length(c) >= 9)
			push(rows, { cpu: "" + (length(c) >= 13 ? c[12] : i), c });
		i++;
	}
	const cols = [
		[ "node_softnet_processed_total", "counter", 1, "Packets the CPU's receive softirq processed" ],
		[ "node_softnet_dropped_total", "counter", 2, "Packets dropped because the CPU's input backlog was full" ],
		[ "node_softnet_times_squeezed_total", "counter", 3, "Times the receive softirq stopped with work left (budget or time used up)" ],
		[ "node_softnet_cpu_collision_total", "counter", 9, "Times a transmit found the device lock taken" ],
		[ "node_softnet_received_rps_total", "counter", 10, "Times the CPU was woken by an RPS inter-processor interrupt" ],
		[ "node_softnet_flow_limit_count_total", "counter", 11, "Times the flow limit dropped a packet" ],
		[ "node_softnet_backlog_len", "gauge", 12, "Packets waiting in the CPU's input and process queues" ],
	];
	for (let d in cols) {
		let m = family(d[0], d[1], d[3]);
		for (let r in rows)
			if (length(r.c) >= d[2])
				m({ cpu: r.cpu }, r.c[d[2] - 1]);
	}
}

function interrupts() {
	let s = readfile(root + "proc/interrupts");
	if (s == null)
		return null;
	let lines = split(s, "\n");
	let cpus = [];
	for (let w in split(trim(lines[0]), /\s+/)) {
		let m = match(w, /^CPU([0-9]+)$/);
		if (m)
			push(cpus, m[1]);
	}
	let irqs = {};
	for (let j = 1; j < length(lines); j++) {
		let m = match(lines[j], /^\s*([0-9]+):(.*)$/);
		if (!m)
			continue;
		let counts = [];
		for (let f in split(trim(m[2]), /\s+/)) {
			if (length(counts) >= length(cpus) || !match(f, /^[0-9]+$/))
				break;
			push(counts, int(f));
		}
		irqs[m[1]] = counts;
	}
	return { cpus, irqs };
}

function days_from_civil(y, m, d) {
	if (m <= 2)
		y--;
	let era = int(y / 400);
	let yoe = y - era * 400;
	let mp = (m + 9) % 12;
	let doy = int((153 * mp + 2) / 5) + d - 1;
	let doe = yoe * 365 + int(yoe / 4) - int(yoe / 100) + doy;
	return era * 146097 + doe - 719468;
}

// unix_time parses an RFC 3339 time as Go writes it.
function unix_time(s) {
	if (type(s) != "string")
		return null;
	let m = match(s, /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(.*)$/);
	if (!m)
		return null;
	let t = days_from_civil(int(m[1]), int(m[2]), int(m[3])) * 86400 + int(m[4]) * 3600 + int(m[5]) * 60 + int(m[6]);
	if (m[7])
		t += +("0" + m[7]);
	if (m[8] != "Z") {
		let z = match(m[8], /^([+-])([0-9]{2}):([0-9]{2})$/);
		if (!z)
			return null;
		let off = int(z[2]) * 3600 + int(z[3]) * 60;
		t += (z[1] == "+") ? -off : off;
	}
	return t;
}

// cpus_of_mask: a kernel hex mask ("f", "00000000,00000003") as sorted CPU ids.
function cpus_of_mask(mask) {
	if (type(mask) != "string")
		return null;
	let h = replace(mask, ",", "");
	if (!match(h, /^[0-9a-fA-F]+$/))
		return null;
	let set = [];
	let bit = 0;
	for (let i = length(h) - 1; i >= 0; i--) {
		let v = hex(substr(h, i, 1));
		for (let b = 0; b < 4; b++)
			if (v & (1 << b))
				push(set, bit + b);
		bit += 4;
	}
	return set;
}

// cpus_of_list: a CPU list ("0-3,6") as sorted CPU ids.
function cpus_of_list(list) {
	if (type(list) != "string" || list == "")
		return null;
	let set = [];
	for (let part in split(list, ",")) {
		let m = match(part, /^([0-9]+)(-([0-9]+))?$/);
		if (!m)
			return null;
		let a = int(m[1]), b = m[3] ? int(m[3]) : a;
		if (b < a || b - a > 4096)
			return null;
		for (let c = a; c <= b; c++)
			push(set, c);
	}
	return uniq(sort(set, (x, y) => x - y));
}

function str(v) {
	return type(v) == "string" ? v : "";
}

function num(v) {
	return type(v) in [ "int", "double" ] ? v : null;
}

function bool(v) {
	return type(v) == "bool" ? (v ? 1 : 0) : null;
}

function count(v) {
	return type(v) == "array" ? length(v) : 0;
}

function obj(v) {
	return type(v) == "object" ? v : null;
}

// status' totals as counters: name, member, help.
const totals = [
	[ "packet_steering_applies_total", "applies", "Applies since the daemon started (set_mode and adaptive moves included; dry runs not)" ],
	[ "packet_steering_knobs_changed_total", "changed", "Knobs the applies wrote" ],
	[ "packet_steering_writes_failed_total", "failed", "Knob writes that failed (failed rollbacks included)" ],
	[ "packet_steering_irqs_refused_total", "irqs_refused", "IRQ moves the kernel refused" ],
	[ "packet_steering_rollbacks_total", "rollbacks", "Devices whose writes an apply undid after one of them failed" ],
	[ "packet_steering_adaptive_moves_total", "adaptive_moves", "Adaptive moves applied without a failed write" ],
];

function steering_status(st) {
	let cfg = obj(st.configured) || {}, plat = obj(st.platform) || {}, svc = obj(st.service) || {};
	family("packet_steering_info", "gauge", "Steering in force: mode, configured mode and its source, policy, flow offload, who serves the object, board and target")({
		mode: str(st.mode), configured_mode: str(cfg.mode), source: str(cfg.source),
		policy: str(st.policy), offload: str(st.offload), served_by: str(svc.served_by),
		board: str(plat.board), target: str(plat.target),
	}, 1);
	family("packet_steering_flows", "gauge", "Configured rps_flow_cnt per rx queue (0: RFS off)")(null, num(cfg.flows));
	family("packet_steering_cpus", "gauge", "Online CPUs the plan uses")(null, num(plat.cpus));
	family("packet_steering_in_sync", "gauge", "1 when every live knob equals the plan")(null, bool(st.in_sync));
	let la = obj(st.last_apply);
	if (la) {
		family("packet_steering_last_apply_timestamp_seconds", "gauge", "When the last apply ran, seconds since the epoch")(null, unix_time(la.time));
		family("packet_steering_last_apply_changed", "gauge", "Knobs the last apply changed")(null, num(la.changed));
		family("packet_steering_last_apply_failed", "gauge", "Knobs the last apply failed to write (its devices were rolled back)")(null, num(la.failed));
		if (num(la.duration_us) != null)
			family("packet_steering_last_apply_duration_seconds", "gauge", "How long the last apply took")(null, la.duration_us / 1000000.0);
	}
	family("packet_steering_unfinished_apply", "gauge", "1 when an apply was found interrupted (its marker left behind)")(null, obj(st.unfinished_apply) ? 1 : 0);
	family("packet_steering_config_errors", "gauge", "Config files that do not parse (the last good settings are kept)")(null, count(st.config_errors));
	let hint = family("packet_steering_hint", "gauge", "A hint the status gives, by id");
	if (type(st.hints) == "array")
		for (let h in st.hints)
			if (obj(h) && type(h.id) == "string")
				hint({ id: h.id }, 1);
	let ad = obj(st.adaptive);
	if (ad) {
		family("packet_steering_adaptive_deviations", "gauge", "Queues the adaptive mode keeps off their auto CPU")(null, count(ad.deviations));
		family("packet_steering_adaptive_moves", "gauge", "Moves in the adaptive mode's recent history (bounded)")(null, count(ad.moves));
		family("packet_steering_adaptive_dropped", "gauge", "Deviations the adaptive plan dropped")(null, count(ad.dropped));
	}
	let tot = obj(st.totals);
	if (tot) {
		family("packet_steering_totals_since_timestamp_seconds", "gauge", "When the totals (packet_steering_*_total) started: the daemon's start, seconds since the epoch")(null, unix_time(tot.since));
		for (let c in totals)
			family(c[0], "counter", c[2])(null, num(tot[c[1]]));
	}
}

function steering_queues(q) {
	let live = family("packet_steering_queue_cpu", "gauge", "A CPU of a queue's knob as the kernel has it (knob rps, xps, napi or irq)");
	let want = family("packet_steering_queue_planned_cpu", "gauge", "A CPU of a queue's knob as the plan wants it");
	let sync = family("packet_steering_queue_in_sync", "gauge", "1 when a planned knob of a queue is as planned");
	let intr = family("packet_steering_queue_interrupts_total", "counter", "Interrupts of a queue's IRQ per CPU, from /proc/interrupts");
	let ints = null;

	function knob(dev, queue, name, lv, wv, parse) {
		let l = parse(lv) || [];
		for (let c in l)
			live({ device: dev, queue, knob: name, cpu: "" + c }, 1);
		if (type(wv) == "string" && wv != "") {
			let w = parse(wv);
			if (w) {
				for (let c in w)
					want({ device: dev, queue, knob: name, cpu: "" + c }, 1);
				sync({ device: dev, queue, knob: name }, join(",", l) == join(",", w) ? 1 : 0);
			}
		}
	}

	function thread_irq(dev, queue, e) {
		if (obj(e.napi))
			knob(dev, queue, "napi", e.napi.cpus, e.napi.want_cpus, cpus_of_list);
		if (obj(e.irq)) {
			knob(dev, queue, "irq", e.irq.cpus, e.irq.want_cpus, cpus_of_list);
			if (type(e.irq.irq) == "int") {
				ints ??= interrupts() || { cpus: [], irqs: {} };
				let counts = ints.irqs["" + e.irq.irq];
				if (counts)
					for (let i = 0; i < length(counts); i++)
						intr({ device: dev, queue, irq: "" + e.irq.irq, cpu: ints.cpus[i] }, counts[i]);
			}
		}
	}

	if (type(q.devices) != "array")
		return;
	for (let d in q.devices) {
		if (!obj(d) || type(d.name) != "string")
			continue;
		for (let r in (type(d.rx) == "array" ? d.rx : []))
			if (obj(r) && type(r.queue) == "string") {
				knob(d.name, r.queue, "rps", r.rps_cpus, r.want_rps_cpus, cpus_of_mask);
				thread_irq(d.name, r.queue, r);
			}
		for (let t in (type(d.tx) == "array" ? d.tx : []))
			if (obj(t) && type(t.queue) == "string") {
				knob(d.name, t.queue, "xps", t.xps_cpus, t.want_xps_cpus, cpus_of_mask);
				thread_irq(d.name, t.queue, t);
			}
	}
}

softnet();
let up = family("packet_steering_up", "gauge", "1 when the packet_steering ubus object answered status in time with a reply that decodes");
let conn = null;
try {
	conn = require("ubus").connect(getenv("PACKET_STEERING_UBUS_SOCKET"), timeout);
} catch (e) {
	conn = null;
}
// One call, one read of the machine: status with get_queues' devices. A
// server that refuses the argument (INVALID_ARGUMENT, an older daemon) is
// asked status alone; one that ignores it (no devices), get_queues.
let st = conn ? conn.call("packet_steering", "status", { queues: true }) : null;
if (conn && st == null && require("ubus").error(true) == 2)
	st = conn.call("packet_steering", "status", {});
if (obj(st)) {
	up(null, 1);
	steering_status(st);
	let q = (type(st.devices) == "array") ? st : conn.call("packet_steering", "get_queues", {});
	family("packet_steering_queues_up", "gauge", "1 when get_queues answered in time with a reply that decodes")(null, obj(q) ? 1 : 0);
	if (obj(q))
		steering_queues(q);
} else {
	up(null, 0);
}
if (conn)
	conn.disconnect();
flush();
