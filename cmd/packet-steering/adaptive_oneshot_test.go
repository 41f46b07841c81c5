//go:build !router || tune

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

// The one-shot commands, without a daemon, know the adaptive deviations
// (from the state file the daemon's engine keeps): status is in sync and
// shows the deviation, apply keeps the moved queue where it is.
func TestOneShotKnowsDeviations(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	daemonEngine := steering.NewEngine(root)
	if _, err := daemonEngine.SetMode(ctx, steering.SetModeRequest{Mode: steering.ModeAdaptive, Persist: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := daemonEngine.Adapt(ctx, []steering.Move{{Device: "eth0", Queue: "rx-1", Kind: steering.UnitNAPI, From: 1, To: 0, Home: 1,
		Reason: "cpu1 saturated (time_squeeze 50/s)"}}); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(ctx, &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, append(args, "--root", root)); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	out := cli("status")
	for _, want := range []string{"in sync", "eth0/rx-1 (napi) on cpu0, auto: cpu1", "recent moves:", "cpu1 saturated (time_squeeze 50/s)"} {
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
	if res.Mode != steering.ModeAdaptive || len(res.Changed) != 0 {
		t.Errorf("one-shot apply: mode %s changed %+v, want nothing changed", res.Mode, res.Changed)
	}
}
