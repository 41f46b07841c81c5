package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

// The one-shot commands, without a daemon, know the adaptive deviations
// (from the state file the daemon's engine keeps): status is in sync and
// shows the deviation, apply keeps the moved queue where it is.
func TestOneShotKnowsDeviations(t *testing.T) {
	ctx := context.Background()
	root := movedRoot(t, adaptive.Move{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, From: 1, To: 0, Home: 1,
		Reason: "cpu1 saturated (time_squeeze 50/s)"})
	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(ctx, &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, append(args, "--root", root)); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	// A bad option of the loop is a config error that names the default
	// used; the rest of the config stands.
	conf := filepath.Join(root, "etc/config/packet_steering")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, append(b, "\nconfig adaptive\n\toption dwell 'long'\n\toption interval '3'\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	out := cli("status")
	for _, want := range []string{"in sync", "eth0/rx-1 (napi) on cpu0, auto: cpu1", "recent moves:", "cpu1 saturated (time_squeeze 50/s)",
		"config error: etc/config/packet_steering: packet_steering.adaptive.dwell: \"long\" is not 0 to 3600 seconds (e.g. 2, 0.5 or 500ms), using 20s\n",
		"options (packet_steering.adaptive): interval 3s\n", "options (default): max_idle_interval 32s, dwell 20s,"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "run `packet-steering apply`") {
		t.Errorf("one-shot status out of sync with a deviation in place:\n%s", out)
	}
	var res steering.Result
	if err := json.Unmarshal([]byte(cli("apply", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != plan.ModeAdaptive || len(res.Changed) != 0 {
		t.Errorf("one-shot apply: mode %s changed %+v, want nothing changed", res.Mode, res.Changed)
	}
}

// A daemon that starts in mode adaptive goes on with the deviations its
// predecessor left in the state file: the start apply changes nothing
// (no event with changes), status shows the deviation and the move.
func TestDaemonKeepsDeviationsAcrossRestart(t *testing.T) {
	root := movedRoot(t, adaptive.Move{Device: "eth0", Queue: "rx-2", Kind: adaptive.UnitNAPI, From: 2, To: 3, Home: 2,
		Reason: "cpu2 saturated (dropped 5/s)"})
	_, sock := ubustest.Start(t)
	events := listenApplied(t, sock)
	log := serveTestDaemon(t, sock, root, adaptive.Config{})
	// The object is served before the start apply ends: wait for its log.
	const started = "msg=applied reason=start mode=adaptive"
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), started) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	st, out := statusReply(t, sock)
	ad, _ := st["adaptive"].(map[string]any)
	if st["in_sync"] != true || ad == nil || len(ad["deviations"].([]any)) != 1 || len(ad["moves"].([]any)) != 1 {
		t.Fatalf("status after the restart: %s", out)
	}
	if d := ad["deviations"].([]any)[0].(map[string]any); d["queue"] != "rx-2" || d["cpu"] != float64(3) || d["auto_cpu"] != float64(2) {
		t.Errorf("deviation %v", d)
	}
	// The start apply changed nothing: logged so, and not announced (an
	// apply is announced only when it changed something).
	if !strings.Contains(log.String(), started+" changed=0") {
		t.Errorf("start apply:\n%s", log.String())
	}
	select {
	case ev := <-events:
		t.Errorf("event after the restart: %v", ev)
	default:
	}
}

// movedRoot is an ipq807x fixture root in mode adaptive (persisted) where
// an engine made the move, as a daemon's loop would have: the deviation
// is in the state file.
func movedRoot(t *testing.T, m adaptive.Move) string {
	t.Helper()
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	e := steering.NewEngine(root)
	if _, err := e.SetMode(ctx, steering.SetModeRequest{Mode: plan.ModeAdaptive, Persist: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Adapt(ctx, []adaptive.Move{m}); err != nil {
		t.Fatal(err)
	}
	return root
}
