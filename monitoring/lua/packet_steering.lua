-- packet_steering: a collector for prometheus-node-exporter-lua
-- (/usr/lib/lua/prometheus-collectors/packet_steering.lua).
--
-- Per CPU, the kernel's softnet counters from /proc/net/softnet_stat with
-- upstream node_exporter's names, labels and types (node_softnet_*, label
-- cpu). The steering state under packet_steering_*, read from the
-- packet_steering ubus object with the ubus CLI and a timeout (one call,
-- status with queues, which the daemon answers from one read of the
-- machine), so that a missing object, a stopped or slow daemon or a reply
-- that does not decode gives packet_steering_up 0, never a failed scrape.
-- Per-queue interrupts come from /proc/interrupts for the IRQs get_queues
-- names. See docs/monitoring.md.
--
-- PACKET_STEERING_ROOT (default /) prefixes the /proc paths (tests run the
-- collector against a fixture root).

local root = os.getenv("PACKET_STEERING_ROOT") or "/"
if root:sub(-1) ~= "/" then root = root .. "/" end

-- Seconds the ubus CLI waits for each reply (ubus -t). A scrape makes one
-- call (two or three only with a server that refuses or ignores status'
-- queues argument, each answered at once), so it ends within timeout
-- against a daemon that never answers.
local timeout = 2

-- At most this many bytes of a reply are decoded (a reply of a router with
-- hundreds of queues is well under it).
local max_reply = 1048576

local json_decode
do
  local ok, cjson = pcall(require, "cjson")
  if ok then
    json_decode = cjson.decode
  else
    local ok2, jsonc = pcall(require, "luci.jsonc")
    if ok2 then json_decode = jsonc.parse end
  end
end

-- num formats a number for the text format: integers without exponent.
local function num(v)
  if type(v) ~= "number" or v ~= v then return nil end
  if v == math.floor(v) and math.abs(v) < 2^53 then
    return string.format("%d", v)
  end
  return string.format("%.17g", v)
end

local function bool(v)
  if v == true then return "1" end
  if v == false then return "0" end
  return nil
end

-- esc escapes a label value (the exporter writes label values as given).
local function esc(s)
  s = tostring(s or "")
  return (s:gsub("\\", "\\\\"):gsub('"', '\\"'):gsub("\n", "\\n"))
end

-- families holds the families of one scrape in the order they were
-- declared; flush writes them, each as one group (the text format wants a
-- family's samples together, and queues add to several families in turn).
local families = {}

-- family declares a metric family with its help text and returns the
-- function that adds one sample to it; a family without samples is not
-- written.
local function family(name, mtype, help)
  local f = { name = name, mtype = mtype, help = help, samples = {} }
  families[#families + 1] = f
  return function(labels, value)
    if value == nil then return end
    local l = nil
    if labels then
      l = {}
      for k, v in pairs(labels) do l[k] = esc(v) end
    end
    f.samples[#f.samples + 1] = { l, value }
  end
end

local function flush()
  for _, f in ipairs(families) do
    if #f.samples > 0 then
      -- The exporter's metric() writes no help text; out is its output.
      if out then out:write("# HELP ", f.name, " ", f.help, "\n") end
      local add = metric(f.name, f.mtype)
      for _, smp in ipairs(f.samples) do add(smp[1], smp[2]) end
    end
  end
  families = {}
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- softnet exports /proc/net/softnet_stat, one row of hexadecimal columns
-- per online CPU: 9 columns in old kernels, 11 with received_rps and
-- flow_limit_count (up to 5.9), 13 with the backlog length and the CPU id
-- (5.10 on). Only the columns the kernel prints are exported; without the
-- CPU id column, cpu is the row number, as in the kernel's own listing.
local function softnet()
  local s = read_file(root .. "proc/net/softnet_stat")
  if not s then return end
  local rows = {}
  local i = 0
  for line in s:gmatch("[^\n]+") do
    local c = {}
    for f in line:gmatch("%S+") do
      local v = tonumber(f, 16)
      if not v then c = nil break end
      c[#c + 1] = v
    end
    if c and #c >= 9 then
      local cpu = i
      if #c >= 13 then cpu = c[13] end
      rows[#rows + 1] = { cpu = tostring(cpu), c = c }
    end
    i = i + 1
  end
  local cols = {
    { "node_softnet_processed_total", "counter", 1, "Packets the CPU's receive softirq processed" },
    { "node_softnet_dropped_total", "counter", 2, "Packets dropped because the CPU's input backlog was full" },
    { "node_softnet_times_squeezed_total", "counter", 3, "Times the receive softirq stopped with work left (budget or time used up)" },
    { "node_softnet_cpu_collision_total", "counter", 9, "Times a transmit found the device lock taken" },
    { "node_softnet_received_rps_total", "counter", 10, "Times the CPU was woken by an RPS inter-processor interrupt" },
    { "node_softnet_flow_limit_count_total", "counter", 11, "Times the flow limit dropped a packet" },
    { "node_softnet_backlog_len", "gauge", 12, "Packets waiting in the CPU's input and process queues" },
  }
  for _, d in ipairs(cols) do
    local m = family(d[1], d[2], d[4])
    for _, r in ipairs(rows) do
      if #r.c >= d[3] then m({ cpu = r.cpu }, num(r.c[d[3]])) end
    end
  end
end

-- interrupts returns /proc/interrupts as irq number -> per-CPU counts, with
-- the CPU ids of the header's columns.
local function interrupts()
  local s = read_file(root .. "proc/interrupts")
  if not s then return nil end
  local cpus, irqs = {}, {}
  local first = true
  for line in s:gmatch("[^\n]+") do
    if first then
      for id in line:gmatch("CPU(%d+)") do cpus[#cpus + 1] = id end
      first = false
    else
      local n, rest = line:match("^%s*(%d+):(.*)$")
      if n then
        local counts = {}
        for f in rest:gmatch("%S+") do
          if #counts >= #cpus or not f:match("^%d+$") then break end
          counts[#counts + 1] = tonumber(f)
        end
        irqs[tonumber(n)] = counts
      end
    end
  end
  return { cpus = cpus, irqs = irqs }
end

-- ubus_call runs `ubus -t timeout call packet_steering method [args]`
-- (args: JSON without single quotes) and decodes its JSON reply; nil when
-- the call fails (the CLI prints a failed call's reply too, such as
-- {"error": ...} before status 9), times out or does not decode, with the
-- CLI's exit status (the ubus status; 2: invalid argument). Lua 5.1's close
-- of a pipe gives no exit status: the shell appends it as a last line.
local function ubus_call(method, args)
  if not json_decode then return nil end
  local cmd = "ubus -t " .. timeout .. " call packet_steering " .. method
  if args then cmd = cmd .. " '" .. args .. "'" end
  local p = io.popen(cmd .. " 2>/dev/null; echo \"#rc=$?\"")
  if not p then return nil end
  local s = p:read(max_reply + 16) or ""
  p:close()
  local body, rc = s:match("^(.-)#rc=(%d+)\n?$")
  if rc ~= "0" or #body == 0 or #body > max_reply then return nil, rc end
  local ok, v = pcall(json_decode, body)
  if not ok or type(v) ~= "table" then return nil, rc end
  return v, rc
end

-- days_from_civil is the number of days from 1970-01-01 to y-m-d
-- (proleptic Gregorian calendar).
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

-- unix_time parses an RFC 3339 time as Go writes it ("Z" or a +hh:mm
-- offset, optional fraction) into seconds since the epoch.
local function unix_time(s)
  if type(s) ~= "string" then return nil end
  local y, mo, d, h, mi, se, frac, zone = s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)(.*)$")
  if not y then return nil end
  local t = days_from_civil(tonumber(y), tonumber(mo), tonumber(d)) * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(se)
  if frac ~= "" and frac ~= "." then t = t + tonumber("0" .. frac) end
  if zone ~= "Z" then
    local sign, zh, zm = zone:match("^([+-])(%d%d):(%d%d)$")
    if not sign then return nil end
    local off = tonumber(zh) * 3600 + tonumber(zm) * 60
    if sign == "+" then t = t - off else t = t + off end
  end
  return t
end

-- cpus_of_mask turns a kernel hex mask ("f", "00000000,00000003") into a
-- set of CPU ids; nil when it is not a mask.
local function cpus_of_mask(mask)
  if type(mask) ~= "string" then return nil end
  local hex = mask:gsub(",", "")
  if hex == "" or not hex:match("^%x+$") then return nil end
  local set = {}
  local bit = 0
  for i = #hex, 1, -1 do
    local v = tonumber(hex:sub(i, i), 16)
    for b = 0, 3 do
      if v % 2 == 1 then set[bit + b] = true end
      v = math.floor(v / 2)
    end
    bit = bit + 4
  end
  return set
end

-- cpus_of_list turns a CPU list ("0-3,6") into a set; nil when it is not one.
local function cpus_of_list(list)
  if type(list) ~= "string" or list == "" then return nil end
  local set = {}
  for part in list:gmatch("[^,]+") do
    local a, b = part:match("^(%d+)%-(%d+)$")
    if not a then a = part:match("^(%d+)$") b = a end
    if not a then return nil end
    a, b = tonumber(a), tonumber(b)
    if b < a or b - a > 4096 then return nil end
    for c = a, b do set[c] = true end
  end
  return set
end

local function same(a, b)
  for k in pairs(a) do if not b[k] then return false end end
  for k in pairs(b) do if not a[k] then return false end end
  return true
end

local function sorted_keys(set)
  local ks = {}
  for k in pairs(set) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

local function count(t)
  if type(t) ~= "table" then return 0 end
  return #t
end

local function str(v)
  if type(v) == "string" then return v end
  return ""
end

-- totals are status' totals as counters: name, member, help.
local totals = {
  { "packet_steering_applies_total", "applies", "Applies since the daemon started (set_mode and adaptive moves included; dry runs not)" },
  { "packet_steering_knobs_changed_total", "changed", "Knobs the applies wrote" },
  { "packet_steering_writes_failed_total", "failed", "Knob writes that failed (failed rollbacks included)" },
  { "packet_steering_irqs_refused_total", "irqs_refused", "IRQ moves the kernel refused" },
  { "packet_steering_rollbacks_total", "rollbacks", "Devices whose writes an apply undid after one of them failed" },
  { "packet_steering_adaptive_moves_total", "adaptive_moves", "Adaptive moves applied without a failed write" },
}

local function steering_status(st)
  local cfg = type(st.configured) == "table" and st.configured or {}
  local plat = type(st.platform) == "table" and st.platform or {}
  local svc = type(st.service) == "table" and st.service or {}
  family("packet_steering_info", "gauge", "Steering in force: mode, configured mode and its source, policy, flow offload, who serves the object, board and target")({
    mode = str(st.mode), configured_mode = str(cfg.mode), source = str(cfg.source),
    policy = str(st.policy), offload = str(st.offload), served_by = str(svc.served_by),
    board = str(plat.board), target = str(plat.target),
  }, "1")
  family("packet_steering_flows", "gauge", "Configured rps_flow_cnt per rx queue (0: RFS off)")(nil, num(cfg.flows))
  family("packet_steering_cpus", "gauge", "Online CPUs the plan uses")(nil, num(plat.cpus))
  family("packet_steering_in_sync", "gauge", "1 when every live knob equals the plan")(nil, bool(st.in_sync))
  local la = type(st.last_apply) == "table" and st.last_apply or nil
  if la then
    family("packet_steering_last_apply_timestamp_seconds", "gauge", "When the last apply ran, seconds since the epoch")(nil, num(unix_time(la.time)))
    family("packet_steering_last_apply_changed", "gauge", "Knobs the last apply changed")(nil, num(la.changed))
    family("packet_steering_last_apply_failed", "gauge", "Knobs the last apply failed to write (its devices were rolled back)")(nil, num(la.failed))
    if type(la.duration_us) == "number" then
      family("packet_steering_last_apply_duration_seconds", "gauge", "How long the last apply took")(nil, num(la.duration_us / 1e6))
    end
  end
  family("packet_steering_unfinished_apply", "gauge", "1 when an apply was found interrupted (its marker left behind)")(nil, type(st.unfinished_apply) == "table" and "1" or "0")
  family("packet_steering_config_errors", "gauge", "Config files that do not parse (the last good settings are kept)")(nil, num(count(st.config_errors)))
  local hint = family("packet_steering_hint", "gauge", "A hint the status gives, by id")
  if type(st.hints) == "table" then
    for _, h in ipairs(st.hints) do
      if type(h) == "table" and type(h.id) == "string" then hint({ id = h.id }, "1") end
    end
  end
  local ad = type(st.adaptive) == "table" and st.adaptive or nil
  if ad then
    family("packet_steering_adaptive_deviations", "gauge", "Queues the adaptive mode keeps off their auto CPU")(nil, num(count(ad.deviations)))
    family("packet_steering_adaptive_moves", "gauge", "Moves in the adaptive mode's recent history (bounded)")(nil, num(count(ad.moves)))
    family("packet_steering_adaptive_dropped", "gauge", "Deviations the adaptive plan dropped")(nil, num(count(ad.dropped)))
  end
  local tot = type(st.totals) == "table" and st.totals or nil
  if tot then
    family("packet_steering_totals_since_timestamp_seconds", "gauge", "When the totals (packet_steering_*_total) started: the daemon's start, seconds since the epoch")(nil, num(unix_time(tot.since)))
    for _, c in ipairs(totals) do
      family(c[1], "counter", c[3])(nil, num(tot[c[2]]))
    end
  end
end

local function steering_queues(q)
  local live = family("packet_steering_queue_cpu", "gauge", "A CPU of a queue's knob as the kernel has it (knob rps, xps, napi or irq)")
  local want = family("packet_steering_queue_planned_cpu", "gauge", "A CPU of a queue's knob as the plan wants it")
  local sync = family("packet_steering_queue_in_sync", "gauge", "1 when a planned knob of a queue is as planned")
  local intr = family("packet_steering_queue_interrupts_total", "counter", "Interrupts of a queue's IRQ per CPU, from /proc/interrupts")
  local ints = nil
  local function knob(dev, queue, name, livev, wantv, parse)
    local l = parse(livev) or {}
    for _, c in ipairs(sorted_keys(l)) do live({ device = dev, queue = queue, knob = name, cpu = c }, "1") end
    if type(wantv) == "string" and wantv ~= "" then
      local w = parse(wantv)
      if w then
        for _, c in ipairs(sorted_keys(w)) do want({ device = dev, queue = queue, knob = name, cpu = c }, "1") end
        sync({ device = dev, queue = queue, knob = name }, same(l, w) and "1" or "0")
      end
    end
  end
  local function thread_irq(dev, queue, e)
    if type(e.napi) == "table" then knob(dev, queue, "napi", e.napi.cpus, e.napi.want_cpus, cpus_of_list) end
    if type(e.irq) == "table" then
      knob(dev, queue, "irq", e.irq.cpus, e.irq.want_cpus, cpus_of_list)
      if type(e.irq.irq) == "number" then
        ints = ints or interrupts() or { cpus = {}, irqs = {} }
        local counts = ints.irqs[e.irq.irq]
        if counts then
          for i, v in ipairs(counts) do
            intr({ device = dev, queue = queue, irq = num(e.irq.irq), cpu = ints.cpus[i] }, num(v))
          end
        end
      end
    end
  end
  if type(q.devices) ~= "table" then return end
  for _, d in ipairs(q.devices) do
    if type(d) == "table" and type(d.name) == "string" then
      for _, r in ipairs(type(d.rx) == "table" and d.rx or {}) do
        if type(r) == "table" and type(r.queue) == "string" then
          knob(d.name, r.queue, "rps", r.rps_cpus, r.want_rps_cpus, cpus_of_mask)
          thread_irq(d.name, r.queue, r)
        end
      end
      for _, t in ipairs(type(d.tx) == "table" and d.tx or {}) do
        if type(t) == "table" and type(t.queue) == "string" then
          knob(d.name, t.queue, "xps", t.xps_cpus, t.want_xps_cpus, cpus_of_mask)
          thread_irq(d.name, t.queue, t)
        end
      end
    end
  end
end

local function collect()
  softnet()
  local up = family("packet_steering_up", "gauge", "1 when the packet_steering ubus object answered status in time with a reply that decodes")
  -- One call, one read of the machine: status with get_queues' devices.
  -- A server that refuses the argument (INVALID_ARGUMENT, an older
  -- daemon) is asked status alone; one that ignores it (no devices in
  -- the reply), get_queues.
  local st, rc = ubus_call("status", '{"queues":true}')
  if not st and rc == "2" then st = ubus_call("status") end
  if not st then
    up(nil, "0")
    return
  end
  up(nil, "1")
  steering_status(st)
  local q = st
  if type(st.devices) ~= "table" then q = ubus_call("get_queues") end
  family("packet_steering_queues_up", "gauge", "1 when get_queues answered in time with a reply that decodes")(nil, q and "1" or "0")
  if q then steering_queues(q) end
end

local function scrape()
  families = {}
  local ok, err = pcall(collect)
  flush()
  if not ok then error(err, 0) end
end

return { scrape = scrape }
