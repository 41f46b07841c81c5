package ubusobj

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// fakeEngine is an Engine with two devices whose applies change the knobs
// of the devices asked for once, and then nothing. It records every request.
type fakeEngine struct {
	mu       sync.Mutex
	mode     plan.Mode
	flows    int
	applied  map[string]bool
	applies  []steering.ApplyRequest
	setModes []steering.SetModeRequest
	failWith error         // returned by every method when set
	block    chan struct{} // when set, Apply waits for it to close
	started  chan struct{} // when set, Apply signals here before blocking
	views    []string      // the view methods called: status, queues, status+queues
}

var fakeDevices = []string{"eth0", "lan1"}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{mode: plan.ModeAuto, applied: map[string]bool{}}
}

func (f *fakeEngine) Status(ctx context.Context) (*steering.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.views = append(f.views, "status")
	return f.statusLocked()
}

func (f *fakeEngine) StatusQueues(ctx context.Context) (*steering.Status, []steering.DeviceQueues, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.views = append(f.views, "status+queues")
	st, err := f.statusLocked()
	if err != nil {
		return nil, nil, err
	}
	q, err := f.queuesLocked("")
	if err != nil {
		return nil, nil, err
	}
	return st, q, nil
}

func (f *fakeEngine) statusLocked() (*steering.Status, error) {
	if f.failWith != nil {
		return nil, f.failWith
	}
	return &steering.Status{
		Mode:       f.mode,
		Configured: plan.Settings{Mode: f.mode, Flows: f.flows, Source: "packet_steering"},
		Policy:     "legacy",
		Platform:   steering.PlatformInfo{Board: "test,board", Model: "Test", Target: "test/generic", CPUs: 2},
		Offload:    "none",
		InSync:     len(f.applied) == len(fakeDevices),
		CPUs:       []steering.CPUStat{{CPU: 0, Processed: 1 << 40}, {CPU: 1, Processed: 7}},
	}, nil
}

func (f *fakeEngine) known(dev string) bool {
	for _, d := range fakeDevices {
		if d == dev {
			return true
		}
	}
	return false
}

func (f *fakeEngine) Queues(ctx context.Context, device string) ([]steering.DeviceQueues, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.views = append(f.views, "queues")
	return f.queuesLocked(device)
}

func (f *fakeEngine) queuesLocked(device string) ([]steering.DeviceQueues, error) {
	if f.failWith != nil {
		return nil, f.failWith
	}
	if device != "" && !f.known(device) {
		return nil, fmt.Errorf("no device %q: %w", device, plan.ErrInvalid)
	}
	var out []steering.DeviceQueues
	for _, d := range fakeDevices {
		if device == "" || device == d {
			out = append(out, steering.DeviceQueues{Name: d, Driver: "veth", Kind: "ethernet",
				Rx: []steering.RxQueueView{{Queue: "rx-0", RPSCPUs: "0", WantRPSCPUs: "2"}}})
		}
	}
	return out, nil
}

func (f *fakeEngine) Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error) {
	f.mu.Lock()
	started, block := f.started, f.block
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	if req.Device != "" && !f.known(req.Device) {
		return nil, fmt.Errorf("no device %q: %w", req.Device, plan.ErrInvalid)
	}
	f.applies = append(f.applies, req)
	return f.applyLocked(req.Device, req.DryRun), nil
}

func (f *fakeEngine) applyLocked(device string, dry bool) *steering.Result {
	res := &steering.Result{Mode: f.mode, DurationUS: 42}
	for _, d := range fakeDevices {
		if device != "" && d != device {
			continue
		}
		if f.applied[d] {
			res.Unchanged++
			continue
		}
		res.Changed = append(res.Changed, plan.Action{Kind: plan.KindRPSCPUs, Device: d, Queue: "rx-0", Value: "2", Current: "0"})
		if !dry {
			f.applied[d] = true
		}
	}
	return res
}

func (f *fakeEngine) SetMode(ctx context.Context, req steering.SetModeRequest) (*steering.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	if _, err := plan.ParseMode(string(req.Mode)); err != nil {
		return nil, err
	}
	f.setModes = append(f.setModes, req)
	if req.Mode != f.mode {
		f.applied = map[string]bool{}
	}
	f.mode = req.Mode
	if req.Flows != nil {
		f.flows = *req.Flows
	}
	return f.applyLocked("", false), nil
}

func (f *fakeEngine) calls() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applies), len(f.setModes)
}

// serve registers a new Object for eng on a fresh broker and returns it with
// a separate caller connection.
func serve(t *testing.T, eng Engine) (*Object, *ubus.Conn, *ubus.Conn) {
	t.Helper()
	_, sock := ubustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	server, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	o := New(eng, Options{Events: server})
	if err := server.AddObject(ctx, o.UbusObject()); err != nil {
		t.Fatal(err)
	}
	caller, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caller.Close() })
	return o, server, caller
}

func call(t *testing.T, c *ubus.Conn, method, args string) (map[string]any, error) {
	t.Helper()
	var attrs []ubus.Attr
	if args != "" {
		var err error
		if attrs, err = ubus.AttrsFromJSON([]byte(args)); err != nil {
			t.Fatalf("bad test JSON %s: %v", args, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := c.Call(ctx, Path, method, attrs)
	if err != nil {
		return nil, err
	}
	return ubus.AttrsValue(reply), nil
}

// caller makes one call of the object and returns the reply, or an error
// carrying the status the caller would see.
type caller func(t *testing.T, method, args string) (map[string]any, error)

func TestMethods(t *testing.T) {
	for name, newCaller := range map[string]func(Engine) caller{
		"daemon": func(e Engine) caller {
			_, _, c := serve(t, e)
			return func(t *testing.T, method, args string) (map[string]any, error) { return call(t, c, method, args) }
		},
		"rpcd": func(e Engine) caller {
			o := New(e, Options{Server: steering.ServerRPCD})
			return func(t *testing.T, method, args string) (map[string]any, error) { return execCall(t, o, method, args) }
		},
	} {
		t.Run(name, func(t *testing.T) {
			eng := newFakeEngine()
			testMethods(t, eng, newCaller(eng), steering.Server(name))
		})
	}
}

func testMethods(t *testing.T, eng *fakeEngine, c caller, server steering.Server) {
	st, err := c(t, "status", "")
	if err != nil {
		t.Fatal(err)
	}
	if st["mode"] != "auto" || st["policy"] != "legacy" || st["in_sync"] != false {
		t.Errorf("status = %v", st)
	}
	if plat, _ := st["platform"].(map[string]any); plat["cpus"] != int64(2) || plat["board"] != "test,board" {
		t.Errorf("status platform = %v", st["platform"])
	}
	if hints, ok := st["hints"].([]any); !ok || len(hints) != 0 {
		t.Errorf("status hints = %#v, want an empty array", st["hints"])
	}
	if _, ok := st["last_apply"]; ok {
		t.Error("status has last_apply before any apply")
	}
	if svc, _ := st["service"].(map[string]any); svc["served_by"] != string(server) {
		t.Errorf("status service = %v, want served_by %s", st["service"], server)
	}
	cpus, _ := st["cpus"].([]any)
	if len(cpus) != 2 || cpus[0].(map[string]any)["processed"] != int64(1<<40) {
		t.Errorf("status cpus = %v", st["cpus"])
	}

	q, err := c(t, "get_queues", "")
	if err != nil {
		t.Fatal(err)
	}
	if devs, _ := q["devices"].([]any); len(devs) != 2 {
		t.Errorf("get_queues devices = %v", q["devices"])
	}
	q, err = c(t, "get_queues", `{"device":"lan1"}`)
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := q["devices"].([]any)
	if len(devs) != 1 || devs[0].(map[string]any)["name"] != "lan1" {
		t.Fatalf("get_queues lan1 = %v", q)
	}
	if tx, ok := devs[0].(map[string]any)["tx"].([]any); !ok || len(tx) != 0 {
		t.Errorf("get_queues tx = %#v, want an empty array", devs[0].(map[string]any)["tx"])
	}

	// status with queues: status' members and get_queues' devices, from
	// one engine call; without it (or false), status alone.
	if _, ok := st["devices"]; ok {
		t.Errorf("status without queues has devices: %v", st["devices"])
	}
	eng.mu.Lock()
	eng.views = nil
	eng.mu.Unlock()
	sq, err := c(t, "status", `{"queues":true}`)
	if err != nil {
		t.Fatal(err)
	}
	all, err := c(t, "get_queues", "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sq["devices"], all["devices"]) {
		t.Errorf("status with queues: devices %v, want get_queues' %v", sq["devices"], all["devices"])
	}
	delete(sq, "devices")
	if !reflect.DeepEqual(sq, st) {
		t.Errorf("status with queues, devices left out: %v\nwant status' %v", sq, st)
	}
	if sf, err := c(t, "status", `{"queues":false}`); err != nil || sf["devices"] != nil {
		t.Errorf("status with queues false = %v, %v; want no devices", sf, err)
	}
	eng.mu.Lock()
	views := eng.views
	eng.mu.Unlock()
	if want := []string{"status+queues", "queues", "status"}; !reflect.DeepEqual(views, want) {
		t.Errorf("engine views %v, want %v (status with queues is one read)", views, want)
	}

	dry, err := c(t, "apply", `{"dry_run":true,"device":"eth0"}`)
	if err != nil {
		t.Fatal(err)
	}
	if ch, _ := dry["changed"].([]any); len(ch) != 1 {
		t.Errorf("dry run changed = %v", dry["changed"])
	}
	res, err := c(t, "apply", `{"reason":"test"}`)
	if err != nil {
		t.Fatal(err)
	}
	if ch, _ := res["changed"].([]any); len(ch) != 2 {
		t.Errorf("apply changed = %v", res["changed"])
	}
	if f, ok := res["failed"].([]any); !ok || len(f) != 0 {
		t.Errorf("apply failed = %#v, want an empty array", res["failed"])
	}
	if res["duration_us"] != int64(42) || res["unchanged"] != int64(0) {
		t.Errorf("apply = %v", res)
	}
	again, err := c(t, "apply", "")
	if err != nil {
		t.Fatal(err)
	}
	if ch, _ := again["changed"].([]any); len(ch) != 0 || again["unchanged"] != int64(2) {
		t.Errorf("second apply = %v", again)
	}
	eng.mu.Lock()
	reasons := []string{eng.applies[0].Reason, eng.applies[1].Reason, eng.applies[2].Reason}
	dryRun := eng.applies[0].DryRun
	eng.mu.Unlock()
	if reasons[0] != DefaultReason || reasons[1] != "test" || reasons[2] != DefaultReason || !dryRun {
		t.Errorf("engine got reasons %v dry run %v", reasons, dryRun)
	}

	sm, err := c(t, "set_mode", `{"mode":"legacy","flows":256}`)
	if err != nil {
		t.Fatal(err)
	}
	if sm["mode"] != "legacy" {
		t.Errorf("set_mode reply mode = %v", sm["mode"])
	}
	eng.mu.Lock()
	got := eng.setModes[0]
	eng.mu.Unlock()
	if got.Mode != plan.ModeLegacy || got.Flows == nil || *got.Flows != 256 || !got.Persist || got.Reason != "set_mode legacy" {
		t.Errorf("engine got %+v", got)
	}
	if _, err := c(t, "set_mode", `{"mode":"off","persist":false}`); err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	got = eng.setModes[1]
	eng.mu.Unlock()
	if got.Persist || got.Flows != nil {
		t.Errorf("engine got %+v, want persist false and flows unchanged", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		method, args string
		want         ubus.Status
	}{
		{"get_queues", `{"device":"wlan9"}`, ubus.StatusInvalidArgument},
		{"get_queues", `{"device":5}`, ubus.StatusInvalidArgument},
		{"get_queues", `{"device":"../../etc"}`, ubus.StatusInvalidArgument},
		{"apply", `{"device":"nope0"}`, ubus.StatusInvalidArgument},
		{"apply", `{"dry_run":"yes"}`, ubus.StatusInvalidArgument},
		{"apply", `{"dry_run":1}`, ubus.StatusInvalidArgument},
		{"apply", `{"dryrun":true}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"turbo"}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":7}`, ubus.StatusInvalidArgument},
		{"set_mode", `{}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"auto","flows":-1}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"auto","flows":1000000000}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"auto","flows":1e9}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"auto","flows":99999999999}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"auto","flows":"10"}`, ubus.StatusInvalidArgument},
		{"set_mode", `{"mode":"auto","persist":"no"}`, ubus.StatusInvalidArgument},
		{"status", `{"verbose":true}`, ubus.StatusInvalidArgument},
		{"reboot", "", ubus.StatusMethodNotFound},
	}
	for _, server := range []string{"daemon", "rpcd"} {
		t.Run(server, func(t *testing.T) {
			eng := newFakeEngine()
			var c caller
			if server == "daemon" {
				_, _, conn := serve(t, eng)
				c = func(t *testing.T, method, args string) (map[string]any, error) { return call(t, conn, method, args) }
			} else {
				o := New(eng, Options{Server: steering.ServerRPCD})
				c = func(t *testing.T, method, args string) (map[string]any, error) { return execCall(t, o, method, args) }
			}
			for _, tt := range tests {
				t.Run(tt.method+" "+tt.args, func(t *testing.T) {
					_, err := c(t, tt.method, tt.args)
					if got := ubus.StatusOf(err); got != tt.want {
						t.Errorf("status %v (%v), want %v", got, err, tt.want)
					}
				})
			}
			if a, s := eng.calls(); a != 0 || s != 0 {
				t.Errorf("refused calls reached the engine: %d applies, %d set_mode", a, s)
			}
		})
	}
}

func TestEngineFailureIsUnknownError(t *testing.T) {
	eng := newFakeEngine()
	eng.failWith = errors.New("read /sys: input/output error")
	_, _, c := serve(t, eng)
	for _, m := range []string{"status", "get_queues", "apply"} {
		if _, err := call(t, c, m, ""); ubus.StatusOf(err) != ubus.StatusUnknownError {
			t.Errorf("%s: %v, want UNKNOWN_ERROR", m, err)
		}
	}
	// The reply says what failed, before the status.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := c.Call(ctx, Path, "set_mode", []ubus.Attr{ubus.String("mode", "off")})
	if ubus.StatusOf(err) != ubus.StatusUnknownError {
		t.Errorf("set_mode: %v, want UNKNOWN_ERROR", err)
	}
	if got := ubus.AttrsValue(reply)["error"]; got != "set_mode: set_mode off: read /sys: input/output error" {
		t.Errorf("set_mode error reply %v, want the engine's error", ubus.AttrsValue(reply))
	}
	eng.mu.Lock()
	eng.failWith = fmt.Errorf("persist: %w", plan.ErrInvalid)
	eng.mu.Unlock()
	if _, err := call(t, c, "set_mode", `{"mode":"auto"}`); ubus.StatusOf(err) != ubus.StatusInvalidArgument {
		t.Errorf("engine ErrInvalid: %v, want INVALID_ARGUMENT", err)
	}
}

// The signature seen through the broker (what `ubus -v list
// packet_steering` prints) is the method table.
func TestLookupSignature(t *testing.T) {
	_, _, c := serve(t, newFakeEngine())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	infos, err := c.Lookup(ctx, Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 {
		t.Fatalf("lookup found %d objects", len(infos))
	}
	got, want := infos[0].Signature, Signature()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("signature\n got %v\nwant %v", got, want)
	}
	if fmt.Sprint(got) != "[{status [{queues bool}]} {get_queues [{device string}]} {apply [{reason string} {device string} {dry_run bool}]} {set_mode [{mode string} {flows int32} {persist bool}]}]" {
		t.Errorf("signature differs from the design: %v", got)
	}
}

func TestAppliedEventAndNotify(t *testing.T) {
	eng := newFakeEngine()
	o, _, c := serve(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events := make(chan []ubus.Attr, 4)
	stop, err := c.Listen(ctx, EventApplied, func(ev string, data []ubus.Attr) { events <- data })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	notes := make(chan string, 4)
	unsub, err := c.Subscribe(ctx, Path, func(typ string, data []ubus.Attr) { notes <- typ })
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	// Wait until the broker's subscription notice has reached the server:
	// before it, the server does not know there is anyone to notify.
	for deadline := time.Now().Add(2 * time.Second); !o.UbusObject().HasSubscribers(); {
		if time.Now().After(deadline) {
			t.Fatal("the server never learnt of its subscriber")
		}
		runtime.Gosched()
	}

	if _, err := call(t, c, "apply", `{"dry_run":true}`); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, c, "apply", `{"reason":"hotplug","device":"lan1"}`); err != nil {
		t.Fatal(err)
	}
	select {
	case data := <-events:
		v := ubus.AttrsValue(data)
		if v["reason"] != "hotplug" || v["mode"] != "auto" || v["changed"] != int64(1) ||
			v["failed"] != int64(0) || v["duration_us"] != int64(42) {
			t.Errorf("event = %v", v)
		}
		if d, _ := v["devices"].([]any); len(d) != 1 || d[0] != "lan1" {
			t.Errorf("event devices = %v", v["devices"])
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no event after a changing apply")
	}
	select {
	case typ := <-notes:
		if typ != NotifyApplied {
			t.Errorf("notification %q", typ)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("subscriber not notified")
	}
	// Nothing changes now: no event.
	if _, err := call(t, c, "apply", `{"device":"lan1"}`); err != nil {
		t.Fatal(err)
	}
	select {
	case data := <-events:
		t.Errorf("event after an apply that changed nothing (or a dry run): %v", ubus.AttrsValue(data))
	case <-time.After(200 * time.Millisecond):
	}
}

func TestDrainWaitsForCallInProgress(t *testing.T) {
	eng := newFakeEngine()
	eng.block = make(chan struct{})
	eng.started = make(chan struct{}, 1)
	o, _, c := serve(t, eng)
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, c, "apply", "")
		errc <- err
	}()
	<-eng.started
	drained := make(chan error, 1)
	go func() { drained <- o.Drain(context.Background()) }()
	select {
	case <-drained:
		t.Fatal("Drain returned while a call was in progress")
	case <-time.After(100 * time.Millisecond):
	}
	// New calls are refused as if the object were gone.
	if _, err := call(t, c, "status", ""); ubus.StatusOf(err) != ubus.StatusNotFound {
		t.Errorf("call while draining: %v, want NOT_FOUND", err)
	}
	close(eng.block)
	if err := <-errc; err != nil {
		t.Errorf("call in progress failed: %v", err)
	}
	if err := <-drained; err != nil {
		t.Errorf("drain: %v", err)
	}
}

func TestDrainTimeout(t *testing.T) {
	eng := newFakeEngine()
	eng.block = make(chan struct{})
	eng.started = make(chan struct{}, 1)
	o, _, c := serve(t, eng)
	go func() { _, _ = call(t, c, "apply", "") }()
	<-eng.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := o.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("drain = %v, want deadline exceeded", err)
	}
	close(eng.block)
}
