package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

// TestDaemonTakesOverWhenStockServiceStarts: procd's object "service"
// (here a stand-in on the test broker) announces that netifd's
// packet_steering service started, as on an upgrade of netifd: the daemon
// runs its takeover at once; other services are ignored; irqbalance
// starting re-applies.
func TestDaemonTakesOverWhenStockServiceStarts(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)

	procd := dialTest(t, sock)
	svc := &ubus.Object{Path: "service"}
	subscribed := make(chan bool, 4)
	svc.OnSubscribe = func(active bool) { subscribed <- active }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := procd.AddObject(ctx, svc); err != nil {
		t.Fatal(err)
	}

	takeovers := make(chan struct{}, 8)
	dctx, stop := context.WithCancel(context.Background())
	log := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- Serve(dctx, Config{Socket: sock, Engine: steering.NewEngine(root),
			Log: NewLogger(log, true), ConnectWait: 2 * time.Second, DrainWait: time.Second,
			Takeover: func(context.Context, func(string)) { takeovers <- struct{}{} }})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatalf("the daemon did not subscribe to procd's service object:\n%s", log.String())
	}

	notify := func(typ, service string) {
		t.Helper()
		if err := procd.Notify(ctx, svc, typ, []ubus.Attr{ubus.String("service", service)}); err != nil {
			t.Fatal(err)
		}
	}
	notify("service.start", "dnsmasq")
	notify("instance.stop", "packet_steering")
	notify("service.start", "packet_steering")
	select {
	case <-takeovers:
	case <-time.After(5 * time.Second):
		t.Fatalf("no takeover after the stock service started:\n%s", log.String())
	}
	select {
	case <-takeovers:
		t.Error("a second takeover without a second start")
	case <-time.After(200 * time.Millisecond):
	}
	if !strings.Contains(log.String(), "taking over again") {
		t.Errorf("takeover not logged:\n%s", log.String())
	}

	notify("instance.start", "irqbalance")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), `reason="irqbalance instance.start"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no apply after irqbalance started:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServiceWatchCoalesces: starts while a takeover runs cause one more
// run, not one each.
func TestServiceWatchCoalesces(t *testing.T) {
	release := make(chan struct{})
	runs := make(chan struct{}, 16)
	w := &serviceWatch{log: NewLogger(&testenv.Buffer{}, false), apply: func(string) {},
		takeover: func(context.Context, func(string)) { runs <- struct{}{}; <-release }}
	start := []ubus.Attr{ubus.String("service", stockService)}
	w.notified("service.start", start)
	<-runs
	for i := 0; i < 5; i++ {
		w.notified("instance.start", start)
	}
	close(release)
	<-runs
	select {
	case <-runs:
		t.Error("more than one run for the starts during the first")
	case <-time.After(200 * time.Millisecond):
	}
}

// TestInitReloadThroughRC: the takeover asks rpcd's rc object (here a
// stand-in on the test broker) to reload the daemon's init script, and
// reports a refused or missing rc object as an error that names the call.
func TestInitReloadThroughRC(t *testing.T) {
	tests := []struct {
		name     string
		register bool
		status   error
		wantErr  string
	}{
		{name: "reloaded", register: true},
		{name: "script failed", register: true, status: ubus.StatusUnknownError, wantErr: "ubus call rc init packet-steering reload"},
		{name: "no rpcd", wantErr: "ubus call rc init packet-steering reload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, sock := ubustest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			calls := make(chan []ubus.Attr, 4)
			if tt.register {
				rpcd := dialTest(t, sock)
				rc := &ubus.Object{Path: rcObject, Methods: []ubus.Method{{Name: "init",
					Handler: func(ctx context.Context, req *ubus.Request) ([]ubus.Attr, error) {
						calls <- req.Args
						return nil, tt.status
					}}}}
				if err := rpcd.AddObject(ctx, rc); err != nil {
					t.Fatal(err)
				}
			}
			err := callInitReload(ctx, sock)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("callInitReload: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("callInitReload: %v, want an error with %q", err, tt.wantErr)
			}
			if !tt.register {
				return
			}
			args := <-calls
			got := map[string]string{}
			for _, a := range args {
				got[a.Name] = a.Str
			}
			if got["name"] != "packet-steering" || got["action"] != "reload" || len(args) != 2 {
				t.Errorf("rc init args = %+v, want name packet-steering, action reload", args)
			}
		})
	}
}

// TestTakeoverFallsBackToProcd: where rpcd's rc object is missing (seen
// under the real procd after ubusd restarted: rpcd does not register
// again), the takeover stops the stock service through procd's `service
// delete` and re-applies; with rc there, rc alone does it; with neither,
// nothing is applied and the failure is logged at err.
func TestTakeoverFallsBackToProcd(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rc, procd   bool
		wantDeletes int
		wantApply   bool
		wantLog     string
	}{
		{name: "rc reloads", rc: true, procd: true},
		{name: "no rc: procd stops it", procd: true, wantDeletes: 1, wantApply: true, wantLog: "stopping the stock service through procd"},
		{name: "neither", wantLog: "level=ERROR msg=\"taking over from netifd's packet_steering service failed\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sock := ubustest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			peer := dialTest(t, sock)
			if tc.rc {
				rc := &ubus.Object{Path: rcObject, Methods: []ubus.Method{{Name: "init",
					Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) { return nil, nil }}}}
				if err := peer.AddObject(ctx, rc); err != nil {
					t.Fatal(err)
				}
			}
			deletes := make(chan string, 4)
			if tc.procd {
				svc := &ubus.Object{Path: procdServiceObject, Methods: []ubus.Method{{Name: "delete",
					Handler: func(_ context.Context, req *ubus.Request) ([]ubus.Attr, error) {
						for _, a := range req.Args {
							if a.Name == "name" {
								deletes <- a.Str
							}
						}
						return nil, nil
					}}}}
				if err := peer.AddObject(ctx, svc); err != nil {
					t.Fatal(err)
				}
			}
			log := &testenv.Buffer{}
			var applied []string
			runTakeover(NewLogger(log, false), sock)(ctx, func(reason string) { applied = append(applied, reason) })
			close(deletes)
			var got []string
			for d := range deletes {
				got = append(got, d)
			}
			if len(got) != tc.wantDeletes || (tc.wantDeletes > 0 && got[0] != stockService) {
				t.Errorf("service delete calls %q, want %d for %q", got, tc.wantDeletes, stockService)
			}
			if tc.wantApply != (len(applied) == 1 && applied[0] == "takeover") {
				t.Errorf("applies %q, want one 'takeover': %v", applied, tc.wantApply)
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("log %q, want %q", log.String(), tc.wantLog)
			}
		})
	}
}
