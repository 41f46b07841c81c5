package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/daemon"
	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// testDaemon is a daemon running in-process on its own goroutine.
type testDaemon struct {
	stop func()          // SIGTERM: cancel and wait for the exit
	hup  chan os.Signal  // SIGHUP
	log  *testenv.Buffer // what it logged
	done <-chan error    // its return value
}

func startDaemon(t *testing.T, sock string, eng ubusobj.Engine) *testDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &testDaemon{hup: make(chan os.Signal, 1), log: &testenv.Buffer{}}
	done := make(chan error, 1)
	d.done = done
	cfg := daemon.Config{Socket: sock, Engine: eng, Log: daemon.NewLogger(d.log, true),
		Hup: d.hup, ConnectWait: 2 * time.Second, DrainWait: 10 * time.Second}
	if l, ok := eng.(daemon.AdaptiveLoop); ok {
		// A real engine runs the adaptive loop, as daemon.Run's does.
		cfg.Loop = l
	}
	go func() { done <- daemon.Serve(ctx, cfg) }()
	var once sync.Once
	d.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("daemon: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("daemon did not stop within 10 s")
			}
		})
	}
	t.Cleanup(d.stop)
	return d
}

// waitServing waits until the daemon has made its start apply.
// startServing starts the daemon on root's engine against the broker at
// sock and returns once the object is registered and the start apply is
// done.
func startServing(t *testing.T, sock, root string) *testDaemon {
	t.Helper()
	d := startDaemon(t, sock, steering.NewEngine(root))
	waitForObject(t, sock, 5*time.Second)
	d.waitServing(t)
	return d
}

func (d *testDaemon) waitServing(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(d.log.String(), "msg=serving") {
		if time.Now().After(deadline) {
			t.Fatalf("daemon not serving after 5 s:\n%s", d.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialTest connects a caller to the broker.
func dialTest(t testing.TB, sock string) *ubus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitForObject polls until packet_steering is registered, for at most d.
func waitForObject(t testing.TB, sock string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := ubus.Dial(ctx, sock)
		if err == nil {
			_, err = c.Lookup(ctx, ubusobj.Path)
			c.Close()
		}
		cancel()
		if err == nil {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s not registered within %v", ubusobj.Path, d)
	return 0
}

// callCmd runs `packet-steering call --socket sock ARGS...` in-process.
func callCmd(t testing.TB, sock string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")},
		append([]string{"call", "--socket", sock}, args...))
	return code, out.String(), errb.String()
}

// statusReply calls status on the broker at sock, fails t unless it exits
// 0, and returns the decoded reply and its text.
func statusReply(t testing.TB, sock string) (map[string]any, string) {
	t.Helper()
	code, out, errOut := callCmd(t, sock, "status")
	if code != 0 {
		t.Fatalf("status: exit %d, %s%s", code, out, errOut)
	}
	return decodeReply(t, out), out
}

func decodeReply(t testing.TB, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, s)
	}
	return v
}

func readKnob(t testing.TB, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestDaemonMethodsOnDemoFixture(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	d := startServing(t, sock, root)

	st, out := statusReply(t, sock)
	for _, k := range []string{"mode", "configured", "policy", "platform", "offload", "in_sync", "hints", "cpus"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status has no %q: %s", k, out)
		}
	}
	if st["in_sync"] != true {
		t.Errorf("in_sync = %v after the start apply", st["in_sync"])
	}
	la, _ := st["last_apply"].(map[string]any)
	if la["reason"] != "start" {
		t.Errorf("last_apply = %v, want reason start", st["last_apply"])
	}
	if plat, _ := st["platform"].(map[string]any); plat["cpus"] != float64(4) {
		t.Errorf("platform = %v", st["platform"])
	}
	if !strings.Contains(d.log.String(), "reason=start") {
		t.Errorf("start apply not logged:\n%s", d.log.String())
	}

	code, out, errOut := callCmd(t, sock, "get_queues")
	if code != 0 {
		t.Fatalf("get_queues: exit %d, %s", code, errOut)
	}
	devs, _ := decodeReply(t, out)["devices"].([]any)
	if len(devs) == 0 {
		t.Fatalf("get_queues: no devices: %s", out)
	}
	first := devs[0].(map[string]any)["name"].(string)
	code, out, _ = callCmd(t, sock, "get_queues", fmt.Sprintf(`{"device":%q}`, first))
	if one, _ := decodeReply(t, out)["devices"].([]any); code != 0 || len(one) != 1 {
		t.Errorf("get_queues %s: exit %d, %s", first, code, out)
	}

	code, out, errOut = callCmd(t, sock, "apply", `{"reason":"test","dry_run":true}`)
	if code != 0 {
		t.Fatalf("apply: exit %d, %s", code, errOut)
	}
	res := decodeReply(t, out)
	if ch, _ := res["changed"].([]any); len(ch) != 0 {
		t.Errorf("dry run after the start apply would change %v", ch)
	}
	for _, k := range []string{"changed", "unchanged", "failed", "duration_us"} {
		if _, ok := res[k]; !ok {
			t.Errorf("apply reply has no %q: %s", k, out)
		}
	}

	code, out, errOut = callCmd(t, sock, "set_mode", `{"mode":"off","persist":false}`)
	if code != 0 {
		t.Fatalf("set_mode: exit %d, %s", code, errOut)
	}
	sm := decodeReply(t, out)
	if sm["mode"] != "off" {
		t.Errorf("set_mode reply mode = %v", sm["mode"])
	}
	if ch, _ := sm["changed"].([]any); len(ch) == 0 {
		t.Errorf("set_mode off changed nothing on a steered router: %s", out)
	}
	code, out, _ = callCmd(t, sock, "status")
	if st := decodeReply(t, out); code != 0 || st["mode"] != "off" {
		t.Errorf("status after set_mode off: mode %v", st["mode"])
	}
}

// The output shape is the stock CLI's: tab-indented, `"key": value`.
func TestCallOutputFormat(t *testing.T) {
	_, sock := ubustest.Start(t)
	server := dialTest(t, sock)
	obj := &ubus.Object{Path: ubusobj.Path, Methods: []ubus.Method{{Name: "status",
		Handler: func(ctx context.Context, req *ubus.Request) ([]ubus.Attr, error) {
			return []ubus.Attr{ubus.String("mode", "auto"), ubus.Bool("in_sync", true),
				ubus.Table("t", ubus.Int32("n", 7)), ubus.Array("a", ubus.String("", "x"))}, nil
		}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := callCmd(t, sock, "status")
	want := "{\n\t\"mode\": \"auto\",\n\t\"in_sync\": true,\n\t\"t\": {\n\t\t\"n\": 7\n\t},\n\t\"a\": [\n\t\t\"x\"\n\t]\n}\n"
	if code != 0 || out != want || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want stdout %q", code, out, errOut, want)
	}
}

func TestCallErrors(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	startDaemon(t, sock, steering.NewEngine(root)).waitServing(t)
	waitForObject(t, sock, 5*time.Second)
	before := readKnob(t, root, "etc/config/network")

	tests := []struct {
		name     string
		args     []string
		code     int
		stderr   string
		noSocket bool
	}{
		{"wrong type", []string{"get_queues", `{"device":1}`}, 2, "Command failed: Invalid argument\n", false},
		{"unknown device", []string{"get_queues", `{"device":"wlan7"}`}, 2, "Command failed: Invalid argument\n", false},
		{"unknown device apply", []string{"apply", `{"device":"wlan7"}`}, 2, "Command failed: Invalid argument\n", false},
		{"unknown mode", []string{"set_mode", `{"mode":"turbo"}`}, 2, "Command failed: Invalid argument\n", false},
		{"flows -1", []string{"set_mode", `{"mode":"auto","flows":-1}`}, 2, "Command failed: Invalid argument\n", false},
		{"flows 1e9", []string{"set_mode", `{"mode":"auto","flows":1000000000}`}, 2, "Command failed: Invalid argument\n", false},
		{"flows as double", []string{"set_mode", `{"mode":"auto","flows":1e9}`}, 2, "Command failed: Invalid argument\n", false},
		{"unknown argument", []string{"apply", `{"dryrun":true}`}, 2, "Command failed: Invalid argument\n", false},
		{"unknown method", []string{"reboot"}, 3, "Command failed: Method not found\n", false},
		{"bad JSON", []string{"apply", `{"reason":`}, 255, "Failed to parse message data\n", false},
		{"JSON not an object", []string{"apply", `[1]`}, 255, "Failed to parse message data\n", false},
		{"no broker", []string{"status"}, 255, "Failed to connect to ubus\n", true},
		{"no method", []string{}, 254, "usage: packet-steering call", false},
		{"too many args", []string{"status", "{}", "x"}, 254, "usage: packet-steering call", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sock
			if tt.noSocket {
				s = filepath.Join(t.TempDir(), "none.sock")
			}
			code, out, errOut := callCmd(t, s, tt.args...)
			if code != tt.code || !strings.HasPrefix(errOut, tt.stderr) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stderr %q", code, out, errOut, tt.code, tt.stderr)
			}
		})
	}
	if after := readKnob(t, root, "etc/config/network"); after != before {
		t.Errorf("refused calls changed the config:\n%s", after)
	}
	code, out, _ := callCmd(t, sock, "status")
	if st := decodeReply(t, out); code != 0 || st["mode"] != "auto" || st["in_sync"] != true {
		t.Errorf("refused calls changed the state: %s", out)
	}
}

// What `ubus -v list packet_steering` prints comes from the lookup's
// signature: each method with its arguments' blobmsg types.
func TestDaemonSignature(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	startDaemon(t, sock, steering.NewEngine(root))
	waitForObject(t, sock, 5*time.Second)
	c := dialTest(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	infos, err := c.Lookup(ctx, ubusobj.Path)
	if err != nil || len(infos) != 1 {
		t.Fatalf("lookup: %v %v", infos, err)
	}
	var b strings.Builder
	for _, m := range infos[0].Signature {
		fmt.Fprintf(&b, "%s:", m.Name)
		for _, a := range m.Args {
			fmt.Fprintf(&b, " %s=%s", a.Name, a.Type)
		}
		b.WriteString("\n")
	}
	want := "status: queues=bool\nget_queues: device=string\napply: reason=string device=string dry_run=bool\nset_mode: mode=string flows=int32 persist=bool\n"
	if b.String() != want {
		t.Errorf("signature:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestDaemonConcurrentClients(t *testing.T) {
	clients, calls := 8, 500
	if raceEnabled || testing.Short() {
		// The same interleavings, at the race detector's cost, or under
		// -short (make test-cross) at an emulator's.
		calls = 50
	}
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	startDaemon(t, sock, steering.NewEngine(root))
	waitForObject(t, sock, 5*time.Second)
	methods := []struct {
		name string
		args []ubus.Attr
	}{
		{"status", nil},
		{"get_queues", nil},
		{"apply", []ubus.Attr{ubus.String("reason", "load"), ubus.Bool("dry_run", true)}},
		{"apply", []ubus.Attr{ubus.String("reason", "load")}},
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := ubus.Dial(ctx, sock)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for j := 0; j < calls; j++ {
				m := methods[(i+j)%len(methods)]
				reply, err := c.Call(ctx, ubusobj.Path, m.name, m.args)
				if err != nil {
					errs <- fmt.Errorf("client %d call %d (%s): %w", i, j, m.name, err)
					return
				}
				if len(reply) == 0 {
					errs <- fmt.Errorf("client %d call %d (%s): empty reply", i, j, m.name)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d clients x %d calls in %v", clients, calls, time.Since(start))
}

func TestDaemonBrokerRestart(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	dir, err := os.MkdirTemp("", "psd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "ubus.sock")
	b, err := ubustest.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, sock, steering.NewEngine(root))
	waitForObject(t, sock, 5*time.Second)

	for round := 0; round < 3; round++ {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		// A call while the broker is down fails; it does not hang.
		if code, _, errOut := callCmd(t, sock, "status"); code != 255 {
			t.Errorf("call without a broker: exit %d %s", code, errOut)
		}
		time.Sleep(100 * time.Millisecond)
		if b, err = ubustest.Listen(sock); err != nil {
			t.Fatal(err)
		}
		took := waitForObject(t, sock, 2*time.Second)
		t.Logf("round %d: object back after %v", round, took)
		if code, out, errOut := callCmd(t, sock, "status"); code != 0 || decodeReply(t, out)["mode"] == nil {
			t.Errorf("status after restart: exit %d %s", code, errOut)
		}
	}
	d.stop()
	b.Close()
	if !strings.Contains(d.log.String(), "ubus connection lost") {
		t.Errorf("connection loss not logged:\n%s", d.log.String())
	}
}

// listenApplied collects packet_steering.applied events on a new connection.
func listenApplied(t *testing.T, sock string) <-chan map[string]any {
	t.Helper()
	c := dialTest(t, sock)
	ch := make(chan map[string]any, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Listen(ctx, ubusobj.EventApplied, func(_ string, data []ubus.Attr) {
		ch <- ubus.AttrsValue(data)
	}); err != nil {
		t.Fatal(err)
	}
	return ch
}

func waitEvent(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(3 * time.Second):
		t.Fatal("no packet_steering.applied event")
		return nil
	}
}

func TestDaemonEventsAndSIGHUP(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	events := listenApplied(t, sock)
	d := startDaemon(t, sock, steering.NewEngine(root))
	waitForObject(t, sock, 5*time.Second)

	ev := waitEvent(t, events)
	if ev["reason"] != "start" || ev["changed"].(int64) == 0 || ev["mode"] != "auto" {
		t.Errorf("start event = %v", ev)
	}
	if devs, _ := ev["devices"].([]any); len(devs) == 0 {
		t.Errorf("start event names no device: %v", ev)
	}

	// A changing call sends the event with its reason.
	if code, _, errOut := callCmd(t, sock, "set_mode", `{"mode":"off","persist":false}`); code != 0 {
		t.Fatalf("set_mode: %s", errOut)
	}
	if ev := waitEvent(t, events); ev["reason"] != "set_mode off" || ev["mode"] != "off" {
		t.Errorf("set_mode event = %v", ev)
	}
	// An apply that changes nothing sends none; SIGHUP re-applies.
	if code, _, errOut := callCmd(t, sock, "apply", `{"reason":"noop"}`); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	if code, _, errOut := callCmd(t, sock, "set_mode", `{"mode":"auto","persist":false}`); code != 0 {
		t.Fatalf("set_mode: %s", errOut)
	}
	if ev := waitEvent(t, events); ev["reason"] != "set_mode auto" {
		t.Errorf("event after a no-op apply: %v", ev)
	}
	// Undo one knob behind the daemon's back; SIGHUP puts it back.
	code, out, _ := callCmd(t, sock, "get_queues")
	if code != 0 {
		t.Fatal(out)
	}
	var knob, want string
	for _, dv := range decodeReply(t, out)["devices"].([]any) {
		dm := dv.(map[string]any)
		for _, q := range dm["rx"].([]any) {
			qm := q.(map[string]any)
			if w := qm["want_rps_cpus"].(string); w != "" && knob == "" {
				knob = filepath.Join("sys/class/net", dm["name"].(string), "queues", qm["queue"].(string), "rps_cpus")
				want = w
			}
		}
	}
	if knob == "" {
		t.Fatalf("no managed rps_cpus knob in %s", out)
	}
	if err := os.WriteFile(filepath.Join(root, knob), []byte("ff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.hup <- syscall.SIGHUP
	ev = waitEvent(t, events)
	if ev["reason"] != "sighup" || ev["changed"] != int64(1) {
		t.Errorf("sighup event = %v", ev)
	}
	if got := readKnob(t, root, knob); !cpuset.SameMask(got, want) {
		t.Errorf("%s = %s after SIGHUP, want %s", knob, got, want)
	}
	select {
	case ev := <-events:
		t.Errorf("unexpected event %v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

// blockingEngine holds applies whose reason is "hold" until release closes.
type blockingEngine struct {
	ubusobj.Engine
	started chan struct{}
	release chan struct{}
}

func (b *blockingEngine) Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error) {
	if req.Reason == "hold" {
		b.started <- struct{}{}
		<-b.release
	}
	return b.Engine.Apply(ctx, req)
}

// SIGTERM while a call is in progress: the call gets its reply, then the
// daemon exits and its object leaves the bus.
func TestDaemonStopsAfterCallInProgress(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	eng := &blockingEngine{Engine: steering.NewEngine(root), started: make(chan struct{}, 1), release: make(chan struct{})}
	d := startDaemon(t, sock, eng)
	waitForObject(t, sock, 5*time.Second)

	type result struct {
		code   int
		stderr string
	}
	res := make(chan result, 1)
	go func() {
		code, _, errOut := callCmd(t, sock, "apply", `{"reason":"hold"}`)
		res <- result{code, errOut}
	}()
	<-eng.started
	stopped := make(chan struct{})
	go func() { d.stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("daemon exited while a call was in progress")
	case <-time.After(200 * time.Millisecond):
	}
	if code, _, errOut := callCmd(t, sock, "status"); code != int(ubus.StatusNotFound) {
		t.Errorf("call while stopping: exit %d %s, want NOT_FOUND", code, errOut)
	}
	close(eng.release)
	if r := <-res; r.code != 0 {
		t.Errorf("call in progress: exit %d %s", r.code, r.stderr)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("daemon did not exit after the call")
	}
	// The broker drops the object when it sees the daemon's connection end,
	// which may come just after the exit.
	c := dialTest(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		_, err := c.Lookup(ctx, ubusobj.Path)
		if errors.Is(err, ubus.StatusNotFound) {
			break
		}
		if ctx.Err() != nil {
			t.Errorf("object still registered 2 s after exit: %v", err)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(d.log.String(), "msg=stopping") {
		t.Errorf("stop not logged:\n%s", d.log.String())
	}
}

// The daemon as a process: real SIGHUP and SIGTERM, exit status 0, and no
// CPU time used while idle.
func TestDaemonProcessSignals(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	events := listenApplied(t, sock)
	d := startDaemonProcess(t, sock, root)
	cmd, stderr := d.cmd, d.stderr
	waitForObject(t, sock, 5*time.Second)
	if ev := waitEvent(t, events); ev["reason"] != "start" {
		t.Errorf("start event = %v", ev)
	}

	// Idle: no CPU ticks over a second.
	before := cpuTicks(t, cmd.Process.Pid)
	time.Sleep(1500 * time.Millisecond)
	if idle := cpuTicks(t, cmd.Process.Pid) - before; idle > 1 {
		if emu := testenv.Emulator(); emu != "" {
			// make test-cross: the ticks are the emulator's own as much.
			t.Logf("idle daemon under %s: %d CPU ticks in 1.5 s (not checked under an emulator)", emu, idle)
		} else {
			t.Errorf("idle daemon used %d CPU ticks in 1.5 s", idle)
		}
	}

	if code, _, errOut := callCmd(t, sock, "set_mode", `{"mode":"off","persist":false}`); code != 0 {
		t.Fatalf("set_mode: %s", errOut)
	}
	waitEvent(t, events)
	// SIGHUP re-applies: status shows it as the last apply (with nothing
	// to change it is logged at debug only, so not in the log here).
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lastReason := func() string {
		_, out, _ := callCmd(t, sock, "status")
		var st struct {
			LastApply struct {
				Reason string `json:"reason"`
			} `json:"last_apply"`
		}
		_ = json.Unmarshal([]byte(out), &st)
		return st.LastApply.Reason
	}
	deadline := time.Now().Add(3 * time.Second)
	for lastReason() != "sighup" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r := lastReason(); r != "sighup" {
		t.Errorf("SIGHUP did not re-apply: last apply %q\n%s", r, stderr.String())
	}
	if strings.Contains(stderr.String(), "reason=sighup") {
		t.Errorf("an apply with nothing to change logged without --debug:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
		if d.err != nil {
			t.Errorf("daemon exit: %v\n%s", d.err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("daemon did not exit on SIGTERM\n%s", stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(line, "level=") {
			t.Errorf("log line not in the daemon's format: %q", line)
		}
	}
}

// TestMain runs the tests, or, in a re-executed test binary, the daemon
// process of TestDaemonProcessSignals: main with the arguments from the
// environment, signals as in main; run under the rpcd plugin's name, the
// plugin (pluginMain).
func TestMain(m *testing.M) {
	if isPlugin(os.Args[0]) {
		os.Exit(pluginMain())
	}
	testenv.Main(m, map[string]func() int{
		"daemon": func() int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin},
				strings.Split(os.Getenv("PS_DAEMON_ARGS"), "\x1f"))
		},
	})
}

// cpuTicks returns utime+stime of a process in clock ticks (proc(5)).
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var u, k int
	fmt.Sscan(fields[11], &u) // field 14 of the line
	fmt.Sscan(fields[12], &k) // field 15
	return u + k
}

// A reply that does not come in time ends as the stock CLI's does: status
// TIMEOUT (7); an object that is not on the bus is NOT_FOUND (4).
func TestCallTimeoutAndNotFound(t *testing.T) {
	_, sock := ubustest.Start(t)
	if code, out, errOut := callCmd(t, sock, "status"); code != 4 || out != "" || errOut != "Command failed: Not found\n" {
		t.Errorf("no daemon: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	root := fixturetest.Root(t, "demo", nil)
	eng := &blockingEngine{Engine: steering.NewEngine(root), started: make(chan struct{}, 1), release: make(chan struct{})}
	startDaemon(t, sock, eng).waitServing(t)
	defer close(eng.release)
	start := time.Now()
	code, out, errOut := callCmd(t, sock, "--timeout", "1", "apply", `{"reason":"hold"}`)
	if code != 7 || out != "" || errOut != "Command failed: Request timed out\n" {
		t.Errorf("timeout: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if took := time.Since(start); took < time.Second || took > 3*time.Second {
		t.Errorf("timeout took %v, want about 1 s", took)
	}
}

// The daemon trims after its start apply and after each call, once.
func TestDaemonTrimsWhenIdle(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	trims := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	log := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(ctx, daemon.Config{Socket: sock, Engine: steering.NewEngine(root),
			Log: daemon.NewLogger(log, false), Hup: make(chan os.Signal), ConnectWait: 2 * time.Second,
			DrainWait: 5 * time.Second, TrimIdle: 50 * time.Millisecond, Trim: func() { trims <- struct{}{} }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-trims:
		case <-time.After(3 * time.Second):
			t.Fatalf("no trim after %s\n%s", what, log.String())
		}
	}
	wait("the start apply")
	for _, m := range []string{"status", "get_queues"} {
		if code, _, errOut := callCmd(t, sock, m); code != 0 {
			t.Fatalf("%s: %s", m, errOut)
		}
		wait(m)
	}
	select {
	case <-trims:
		t.Fatal("trim while idle")
	case <-time.After(200 * time.Millisecond):
	}
}

// A daemon restarted after one was killed mid-apply (its marker left in
// var/run, a knob half-written): the start apply puts every device into
// the configured state, status says the previous apply did not finish, and
// the daemon logs it. (steering's TestKillDuringApply kills a real apply.)
func TestDaemonReportsUnfinishedApply(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	marker := filepath.Join(root, "var/run", steering.ApplyMarkerFile)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, []byte("pid=4242\nstarted=2026-11-30T01:02:03Z\nreason=\"set_mode off\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, sock := ubustest.Start(t)
	d := startServing(t, sock, root)

	code, out, errOut := callCmd(t, sock, "status")
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errOut)
	}
	st := decodeReply(t, out)
	if st["in_sync"] != true {
		t.Errorf("in_sync = %v after the start apply", st["in_sync"])
	}
	u, _ := st["unfinished_apply"].(map[string]any)
	if u["reason"] != "set_mode off" || u["pid"] != float64(4242) || u["found_by"] != "start" {
		t.Errorf("unfinished_apply = %v", st["unfinished_apply"])
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("marker after the start apply: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(d.log.String(), "previous apply did not finish") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(d.log.String(), "previous apply did not finish") {
		t.Errorf("not logged:\n%s", d.log.String())
	}
}
