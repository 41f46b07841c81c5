// Package ubusobj is the ubus object packet_steering: its methods (status,
// get_queues, apply, set_mode), their argument policies, the replies built
// from the steering engine's types, and the event packet_steering.applied
// sent after an apply that changed something.
//
// The methods live in one table whose argument policies are data (name,
// blobmsg type, required or not, a check of the value). The same table builds
// the signature `ubus -v list packet_steering` shows and validates every
// call, so the two cannot disagree. A call with a wrong type, an unknown
// argument, mode or device, or flows out of range is answered
// INVALID_ARGUMENT (2) before the engine is asked to do anything.
//
// The package must never write a knob itself or join a caller's string into
// a path: it validates, hands typed requests to the engine (which serialises
// applies) and turns the engine's answers into replies. It holds no global
// mutable state.
package ubusobj

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// Path is the object's name on the bus.
const Path = "packet_steering"

// EventApplied is the event sent after an apply that changed something, with
// reason, mode, changed (count), failed (count), duration_us and devices
// (the names of the devices whose knobs changed).
const EventApplied = "packet_steering.applied"

// NotifyApplied is the notification type the object's subscribers get with
// the same data as EventApplied.
const NotifyApplied = "applied"

// DefaultReason is the reason recorded for an apply whose caller gave none.
const DefaultReason = "manual"

// Engine is what the object needs from the steering engine;
// *steering.Engine implements it. Errors wrapping steering.ErrInvalid are the
// caller's mistake, with nothing changed.
type Engine interface {
	Status(ctx context.Context) (*steering.Status, error)
	Queues(ctx context.Context, device string) ([]steering.DeviceQueues, error)
	// StatusQueues is Status and Queues(ctx, "") from one read of the
	// machine (status with queues: a monitoring scrape).
	StatusQueues(ctx context.Context) (*steering.Status, []steering.DeviceQueues, error)
	Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error)
	SetMode(ctx context.Context, req steering.SetModeRequest) (*steering.Result, error)
}

// Events is where applies are announced: an event to every listener and a
// notification to the object's subscribers. *ubus.Client and *ubus.Conn
// implement it.
type Events interface {
	Send(ctx context.Context, event string, data []ubus.Attr) error
	Notify(ctx context.Context, obj *ubus.Object, typ string, data []ubus.Attr) error
}

// Options configures an Object. The zero value is usable: no events, no log.
type Options struct {
	// Events receives packet_steering.applied; nil sends nothing.
	Events Events
	// Logger gets one line per apply and per failed call; nil logs nothing.
	Logger Logger
	// EventTimeout bounds sending the event and the notification (default 2 s).
	EventTimeout time.Duration
	// Server is who serves the object, reported by status (default
	// steering.ServerDaemon).
	Server steering.Server
}

// Method is one row of the method table: the name, the argument policies
// (signature and validation at once) and the call that decodes the
// arguments with them and builds the reply.
type Method struct {
	Name string
	Args []ArgPolicy
	call func(o *Object, ctx context.Context, args []ubus.Attr) (any, error)
}

// method builds a row: fields is the one policy table of the method (wire
// names, types, checks) and says where each value goes in the argument
// struct newArgs returns (a pointer, holding the defaults); run gets that
// pointer once the arguments are decoded.
//
//go:noinline
func method(name string, newArgs func() any, fields []Field, run func(o *Object, ctx context.Context, a any) (any, error)) Method {
	return Method{Name: name, Args: policies(fields), call: func(o *Object, ctx context.Context, args []ubus.Attr) (any, error) {
		a := newArgs()
		if err := decodeArgs(fields, a, args); err != nil {
			return nil, err
		}
		return run(o, ctx, a)
	}}
}

// statusArgs is the argument struct of status.
type statusArgs struct {
	Queues bool // also get_queues' devices, from the same read
}

// queuesArgs is the argument struct of get_queues.
type queuesArgs struct {
	Device string // "" = every device
}

// applyArgs is the argument struct of apply.
type applyArgs struct {
	_      outline.NoCompare
	Reason string
	Device string // "" = every device
	DryRun bool
}

// setModeArgs is the argument struct of set_mode.
type setModeArgs struct {
	_       outline.NoCompare
	Mode    plan.Mode
	Flows   *int // nil = unchanged
	Persist bool
}

// Methods returns the object's method table, in the order `ubus -v list`
// shows it.
func Methods() []Method {
	return []Method{
		method("status", func() any { return &statusArgs{} }, []Field{
			{ArgPolicy{Name: "queues", Type: ubus.TypeBool,
				Doc: "also every device's queues as get_queues gives them, from the same read of the machine"},
				func(d any, a ubus.Attr) { d.(*statusArgs).Queues = a.Bool() }},
		}, (*Object).callStatus),
		method("get_queues", func() any { return &queuesArgs{} }, []Field{
			{ArgPolicy{Name: "device", Type: ubus.TypeString, Check: checkDevice,
				Doc: "only this netdev (default: every device)"},
				func(d any, a ubus.Attr) { d.(*queuesArgs).Device = a.Str }},
		}, (*Object).callQueues),
		method("apply", func() any { return &applyArgs{Reason: DefaultReason} }, []Field{
			{ArgPolicy{Name: "reason", Type: ubus.TypeString, Check: checkReason,
				Doc: "why, recorded in status and the event (default \"" + DefaultReason + "\")"},
				func(d any, a ubus.Attr) { d.(*applyArgs).Reason = a.Str }},
			{ArgPolicy{Name: "device", Type: ubus.TypeString, Check: checkDevice,
				Doc: "only this netdev's knobs (default: every device)"},
				func(d any, a ubus.Attr) { d.(*applyArgs).Device = a.Str }},
			{ArgPolicy{Name: "dry_run", Type: ubus.TypeBool,
				Doc: "report what would change, write nothing"},
				func(d any, a ubus.Attr) { d.(*applyArgs).DryRun = a.Bool() }},
		}, (*Object).callApply),
		method("set_mode", func() any { return &setModeArgs{Persist: true} }, []Field{
			{ArgPolicy{Name: "mode", Type: ubus.TypeString, Required: true, Check: checkMode,
				Doc: "off, legacy, all, auto, custom or adaptive"},
				func(d any, a ubus.Attr) { d.(*setModeArgs).Mode = plan.Mode(a.Str) }},
			{ArgPolicy{Name: "flows", Type: ubus.TypeInt32, Check: checkFlows,
				Doc: "rps_flow_cnt per rx queue, 0 to steering.MaxFlows (default: unchanged)"},
				func(d any, a ubus.Attr) { n := int(a.Int); d.(*setModeArgs).Flows = &n }},
			{ArgPolicy{Name: "persist", Type: ubus.TypeBool,
				Doc: "write the choice to UCI (default true)"},
				func(d any, a ubus.Attr) { d.(*setModeArgs).Persist = a.Bool() }},
		}, (*Object).callSetMode),
	}
}

// Signature returns the table as the broker's lookup reports it.
func Signature() []ubus.MethodSig {
	ms := Methods()
	sig := make([]ubus.MethodSig, len(ms))
	for i, m := range ms {
		sig[i] = ubus.MethodSig{Name: m.Name, Args: argSigs(m.Args)}
	}
	return sig
}

func argSigs(policy []ArgPolicy) []ubus.ArgSig {
	out := make([]ubus.ArgSig, len(policy))
	for i, p := range policy {
		out[i] = ubus.ArgSig{Name: p.Name, Type: p.Type}
	}
	return out
}

// Logger is where an Object logs applies and failed calls: a message and
// then key-value pairs, as log/slog's Logger methods take them (a
// *slog.Logger is a Logger). The interface keeps log/slog out of programs
// that do not use it.
type Logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// discardLogger logs nothing.
type discardLogger struct{}

func (discardLogger) Debug(string, ...any) {}
func (discardLogger) Info(string, ...any)  {}
func (discardLogger) Warn(string, ...any)  {}
func (discardLogger) Error(string, ...any) {}

// Object is the packet_steering object. It is safe for concurrent use: the
// broker connection serves calls concurrently and the engine serialises the
// applies among them.
type Object struct {
	engine       Engine
	events       Events
	log          Logger
	eventTimeout time.Duration
	server       steering.Server
	obj          *ubus.Object
	enc          encoder // reply encoding, with the field lists it has met

	mu       outline.Mutex
	draining bool
	inflight sync.WaitGroup
}

// New returns the object served by engine.
func New(engine Engine, opts Options) *Object {
	o := &Object{engine: engine, events: opts.Events, log: opts.Logger, eventTimeout: opts.EventTimeout, server: opts.Server}
	if o.server == "" {
		o.server = steering.ServerDaemon
	}
	if o.log == nil {
		o.log = discardLogger{}
	}
	if o.eventTimeout <= 0 {
		o.eventTimeout = 2 * time.Second
	}
	ms := Methods()
	o.obj = &ubus.Object{Path: Path, Methods: make([]ubus.Method, len(ms))}
	for i, m := range ms {
		o.obj.Methods[i] = ubus.Method{Name: m.Name, Args: argSigs(m.Args), Handler: o.handler(m)}
	}
	return o
}

// UbusObject returns the object to register with ubus.Client.Register or
// ubus.Conn.AddObject.
func (o *Object) UbusObject() *ubus.Object { return o.obj }

// Drain makes the object answer new calls NOT_FOUND, as the bus does once
// the daemon is gone, and waits until the calls in progress have replied or
// ctx is done. Keep the connection open until it returns: the broker routes
// a reply only while the object is registered.
func (o *Object) Drain(ctx context.Context) error {
	o.mu.Lock()
	o.draining = true
	o.mu.Unlock()
	done := make(chan struct{})
	go func() { o.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return outline.Errorf("ubusobj: drain: %w", ctx.Err())
	}
}

// enter counts a call in; false once draining.
func (o *Object) enter() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.draining {
		return false
	}
	o.inflight.Add(1)
	return true
}

// handler validates the arguments with the method's policy, runs the call,
// and encodes the reply.
func (o *Object) handler(m Method) ubus.Handler {
	return func(ctx context.Context, req *ubus.Request) ([]ubus.Attr, error) {
		if !o.enter() {
			return nil, ubus.StatusNotFound
		}
		// Counted out once the reply is on the wire: Drain returning lets the
		// daemon close the connection, which must not lose this reply.
		req.AfterReply = o.inflight.Done
		return o.invoke(ctx, m, req.Args, fmt.Sprintf("%08x", req.Peer))
	}
}

// Call runs one call of the method name with args as a ubus call would,
// without the bus: the same validation, engine call and reply. Errors wrap
// the ubus status the daemon would reply (ubus.StatusOf finds it):
// METHOD_NOT_FOUND for a method not in the table, INVALID_ARGUMENT for the
// caller's mistakes, UNKNOWN_ERROR for the rest. The rpcd plugin serves
// the object with it.
func (o *Object) Call(ctx context.Context, name string, args []ubus.Attr) ([]ubus.Attr, error) {
	for _, m := range Methods() {
		if m.Name == name {
			return o.invoke(ctx, m, args, "exec")
		}
	}
	return nil, outline.Errorf("%w: %q", ubus.StatusMethodNotFound, name)
}

// invoke decodes args with m's policy, runs m and encodes its reply; peer
// names the caller in the log.
func (o *Object) invoke(ctx context.Context, m Method, args []ubus.Attr, peer string) ([]ubus.Attr, error) {
	v, err := m.call(o, ctx, args)
	if err != nil {
		err = o.callError(m.Name, peer, err)
		if errors.Is(err, ubus.StatusUnknownError) {
			// The caller did nothing wrong: say what failed (a config
			// file refused, a read-only directory) with the status.
			return []ubus.Attr{ubus.String("error", errorText(err))}, err
		}
		return nil, err
	}
	reply, err := o.enc.encodeReply(v)
	if err != nil {
		o.log.Error("encode reply", "method", m.Name, "err", err)
		return nil, outline.Errorf("%w: encode %s reply: %w", ubus.StatusUnknownError, m.Name, err)
	}
	return reply, nil
}

// callError maps an engine error to the status replied: INVALID_ARGUMENT for
// the caller's mistakes, UNKNOWN_ERROR (logged) for everything else.
func (o *Object) callError(method, peer string, err error) error {
	if errors.Is(err, errArg) {
		o.log.Debug("refused call", "method", method, "peer", peer, "err", err)
		return err
	}
	if errors.Is(err, plan.ErrInvalid) {
		o.log.Debug("refused call", "method", method, "peer", peer, "err", err)
		return outline.Errorf("%w: %w", ubus.StatusInvalidArgument, err)
	}
	o.log.Error("call failed", "method", method, "err", err)
	return outline.Errorf("%w: %s: %w", ubus.StatusUnknownError, method, err)
}

// errorText is err's message without the status prefix callError adds.
func errorText(err error) string {
	return strings.TrimPrefix(err.Error(), ubus.StatusUnknownError.Error()+": ")
}

// statusReply is the reply of status: the engine's status and who serves
// the object.
type statusReply struct {
	_ outline.NoCompare
	*steering.Status
	Service ServiceInfo `json:"service"`
}

// ServiceInfo says who serves the object and what that allows.
type ServiceInfo struct {
	_ outline.NoCompare
	// ServedBy is "daemon" or "rpcd" (the exec plugin).
	ServedBy steering.Server `json:"served_by"`
	// Events is whether applies are announced (the event
	// packet_steering.applied and notifications to subscribers): only a
	// resident daemon can; the plugin lives for one call.
	Events bool `json:"events"`
}

// statusQueuesReply is the reply of status with queues: status and
// get_queues' devices, from one read.
type statusQueuesReply struct {
	statusReply
	Devices []steering.DeviceQueues `json:"devices"`
}

func (o *Object) callStatus(ctx context.Context, v any) (any, error) {
	var st *steering.Status
	var devs []steering.DeviceQueues
	var err error
	queues := v.(*statusArgs).Queues
	if queues {
		st, devs, err = o.engine.StatusQueues(ctx)
	} else {
		st, err = o.engine.Status(ctx)
	}
	if err != nil {
		return nil, err
	}
	if st.Hints == nil {
		st.Hints = []plan.Hint{}
	}
	if st.CPUs == nil {
		st.CPUs = []steering.CPUStat{}
	}
	r := statusReply{Status: st, Service: ServiceInfo{ServedBy: o.server, Events: o.events != nil}}
	if queues {
		return statusQueuesReply{statusReply: r, Devices: normaliseQueues(devs)}, nil
	}
	return r, nil
}

// queuesReply is the reply of get_queues.
type queuesReply struct {
	Devices []steering.DeviceQueues `json:"devices"`
}

func (o *Object) callQueues(ctx context.Context, v any) (any, error) {
	dev := v.(*queuesArgs).Device
	devs, err := o.engine.Queues(ctx, dev)
	if err != nil {
		return nil, err
	}
	if dev != "" && len(devs) == 0 {
		return nil, outline.Errorf("no device %q: %w", dev, plan.ErrInvalid)
	}
	return queuesReply{Devices: normaliseQueues(devs)}, nil
}

// normaliseQueues gives the lists of a get_queues reply as [] rather than
// null.
//
//go:noinline
func normaliseQueues(devs []steering.DeviceQueues) []steering.DeviceQueues {
	if devs == nil {
		devs = []steering.DeviceQueues{}
	}
	for i := range devs {
		if devs[i].Rx == nil {
			devs[i].Rx = []steering.RxQueueView{}
		}
		if devs[i].Tx == nil {
			devs[i].Tx = []steering.TxQueueView{}
		}
	}
	return devs
}

func (o *Object) callApply(ctx context.Context, v any) (any, error) {
	a := v.(*applyArgs)
	res, err := o.Apply(ctx, steering.ApplyRequest{Reason: a.Reason, Device: a.Device, DryRun: a.DryRun})
	if err != nil {
		return nil, err
	}
	return normalise(res), nil
}

func (o *Object) callSetMode(ctx context.Context, v any) (any, error) {
	a := v.(*setModeArgs)
	res, err := o.SetMode(ctx, steering.SetModeRequest{Mode: a.Mode, Flows: a.Flows, Persist: a.Persist})
	if err != nil {
		return nil, err
	}
	return normalise(res), nil
}

// normalise gives the reply's lists as [] rather than null.
func normalise(r *steering.Result) *steering.Result {
	if r.Changed == nil {
		r.Changed = []plan.Action{}
	}
	if r.Failed == nil {
		r.Failed = []steering.Failure{}
	}
	return r
}

// Apply runs one apply through the engine, logs it and, if it changed
// something, announces it. An empty reason is DefaultReason. The apply is
// not cancelled with ctx once asked for: a half-written state helps no one.
func (o *Object) Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error) {
	if req.Reason == "" {
		req.Reason = DefaultReason
	}
	res, err := o.engine.Apply(context.WithoutCancel(ctx), req)
	if err != nil {
		return nil, outline.Errorf("apply (%s): %w", req.Reason, err)
	}
	if !req.DryRun {
		o.logApply(req.Reason, res)
		o.announce(ctx, req.Reason, res)
	}
	return res, nil
}

// SetMode changes the mode through the engine, which applies it; it logs
// and announces like Apply. An empty reason is "set_mode MODE".
func (o *Object) SetMode(ctx context.Context, req steering.SetModeRequest) (*steering.Result, error) {
	if req.Reason == "" {
		req.Reason = "set_mode " + string(req.Mode)
	}
	res, err := o.engine.SetMode(context.WithoutCancel(ctx), req)
	if err != nil {
		return nil, outline.Errorf("%s: %w", req.Reason, err)
	}
	o.logApply(req.Reason, res)
	o.announce(ctx, req.Reason, res)
	return res, nil
}

// Adapter is the engine's adaptive half; *steering.Engine implements it.
type Adapter interface {
	Adapt(ctx context.Context, moves []adaptive.Move) (*steering.Result, error)
}

// Adapt applies the adaptive loop's moves through the engine (which must
// implement Adapter), logs each move with its reason and, when something
// changed, announces the apply as EventApplied with the reason
// adaptive.Reason gives (which queue, from and to which CPU, which
// CPU was saturated by which measure).
func (o *Object) Adapt(ctx context.Context, moves []adaptive.Move) (*steering.Result, error) {
	a, ok := o.engine.(Adapter)
	if !ok {
		return nil, errors.New("adaptive moves: the engine cannot apply them")
	}
	reason := adaptive.Reason(moves)
	res, err := a.Adapt(context.WithoutCancel(ctx), moves)
	if err != nil {
		o.log.Warn("adaptive move not applied", "reason", reason, "err", err)
		return nil, outline.Errorf("%s: %w", reason, err)
	}
	for _, m := range moves {
		o.log.Info("adaptive move", "queue", m.Key(), "kind", m.Kind, "from", m.From, "to", m.To, "auto_cpu", m.Home, "why", m.Reason)
	}
	o.logApply(reason, res)
	o.announce(ctx, reason, res)
	return res, nil
}

// logApply logs an apply: at info when it changed knobs, at error (syslog
// err) when a knob could not be written, with one line per failed write,
// so that a priority filter on the system log (`logread | grep
// daemon.err`) shows the failures and only them. An apply that found
// everything in place is logged at debug only: procd runs a reload on
// every interface event and hotplug an apply for every new netdev
// (VLANs, bridges, wifi interfaces, PPP), and on a router those lines
// would fill logd's buffer with "nothing to do".
//
//go:noinline
func (o *Object) logApply(reason string, res *steering.Result) { LogApply(o.log, reason, res) }

// LogApply logs the result of an apply to log as the daemon does (see
// logApply); the one-shot `packet-steering apply --syslog` that the init
// and hotplug scripts run when no daemon serves logs the same lines.
func LogApply(log Logger, reason string, res *steering.Result) {
	logf := log.Info
	switch {
	case len(res.Failed) > 0:
		logf = log.Error
	case len(res.Changed) == 0:
		logf = log.Debug
	}
	logf("applied", "reason", reason, "mode", string(res.Mode),
		"changed", len(res.Changed), "unchanged", res.Unchanged, "failed", len(res.Failed),
		"duration_us", res.DurationUS)
	for _, f := range res.Failed {
		log.Error("write failed", "kind", f.Action.Kind, "target", target(f.Action), "value", f.Action.Value, "err", f.Error)
	}
	for _, f := range res.Refused {
		log.Info("irq affinity refused by the kernel; recorded, not retried", "target", target(f.Action), "value", f.Action.Value, "err", f.Error)
	}
}

// target names the knob an action writes, for the log.
func target(a plan.Action) string {
	switch {
	case a.Queue != "":
		return a.Device + "/" + a.Queue
	case a.Thread != "":
		return fmt.Sprintf("%s[%d]", a.Thread, a.PID)
	case a.IRQ != 0:
		return fmt.Sprintf("irq %d", a.IRQ)
	case a.Key != "":
		return a.Key
	}
	return a.Device
}

// EventData returns the data of EventApplied for an apply.
func EventData(reason string, res *steering.Result) []ubus.Attr {
	// Every device the apply touched, also through its NAPI threads and
	// IRQs (Result.Devices); devices of queue knobs when a result has no
	// list.
	names := res.Devices
	if names == nil {
		seen := map[string]bool{}
		for _, a := range res.Changed {
			if a.Device != "" && !seen[a.Device] {
				seen[a.Device] = true
				names = append(names, a.Device)
			}
		}
		outline.SortStrings(names)
	}
	devs := []ubus.Attr{}
	for _, d := range names {
		devs = append(devs, ubus.String("", d))
	}
	return []ubus.Attr{
		ubus.String("reason", reason),
		ubus.String("mode", string(res.Mode)),
		intAttr("changed", int64(len(res.Changed))),
		intAttr("failed", int64(len(res.Failed))),
		intAttr("duration_us", res.DurationUS),
		ubus.Array("devices", devs...),
	}
}

// intAttr encodes an integer as the stock CLI would: int32 when it fits,
// else int64.
//
//go:noinline
func intAttr(name string, v int64) ubus.Attr {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		return ubus.Int32(name, int32(v))
	}
	return ubus.Int64(name, v)
}

// announce sends EventApplied and notifies subscribers when res changed
// something. Failures are logged: the apply itself succeeded.
func (o *Object) announce(ctx context.Context, reason string, res *steering.Result) {
	if o.events == nil || len(res.Changed) == 0 {
		return
	}
	data := EventData(reason, res)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.eventTimeout)
	defer cancel()
	if err := o.events.Send(ctx, EventApplied, data); err != nil {
		o.log.Warn("event not sent", "event", EventApplied, "err", err)
	}
	if o.obj.HasSubscribers() {
		if err := o.events.Notify(ctx, o.obj, NotifyApplied, data); err != nil {
			o.log.Warn("subscribers not notified", "err", err)
		}
	}
}
