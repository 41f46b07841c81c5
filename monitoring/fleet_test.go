package monitoring_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFleetConfigPush: a fleet tool (OpenWISP's template, Ansible's uci or
// template module) replaces /etc/config/packet_steering and runs
// reload_config; procd's config trigger runs the init script's reload,
// which asks the daemon to apply (`ubus call packet_steering apply
// {"reason":"reload"}`, files/etc/init.d/packet-steering). The new mode is
// applied and shows in status, in the exporter's scrape and in
// `packet-steering report`, whose file `plan --snapshot` replays. A pushed
// file that does not parse changes nothing and shows as a config error.
func TestFleetConfigPush(t *testing.T) {
	requireMonitoring(t, "lua5.1", "unshare")
	w := newWorld(t, "", preset)
	w.startDaemon(t)
	if st := w.mustCall(t, "status"); st["mode"] != "auto" {
		t.Fatalf("fixture starts in mode %v, want auto", st["mode"])
	}
	push := func(content string) {
		t.Helper()
		cfg := filepath.Join(w.root, "etc/config/packet_steering")
		tmp := cfg + ".new"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfg); err != nil { // the file replaced, as scp or a template does
			t.Fatal(err)
		}
		// What procd's trigger for the config runs: reload_service's call.
		out, err := exec.Command(binary(t), "call", "-s", w.sock, "apply", `{"reason":"reload"}`).CombinedOutput()
		if err != nil {
			t.Fatalf("reload apply: %v\n%s", err, out)
		}
	}
	push("config globals 'globals'\n\toption mode 'legacy'\n\toption flows '0'\n\toption daemon 'auto'\n")

	st := w.mustCall(t, "status")
	cfg := st["configured"].(map[string]any)
	la := st["last_apply"].(map[string]any)
	if st["mode"] != "legacy" || cfg["source"] != "packet_steering" || st["in_sync"] != true || la["reason"] != "reload" {
		t.Fatalf("after the push: mode %v source %v in_sync %v last apply %v", st["mode"], cfg["source"], st["in_sync"], la)
	}
	text, _ := scrapeLua(t, w, ubusStandIn(t, w.sock))
	got := parseScrape(t, text)
	checkSeries(t, got, expectedSeries(t, w, st, w.mustCall(t, "get_queues")))
	if len(family(got, "packet_steering_info")) != 1 || got["packet_steering_in_sync"].value != 1 {
		t.Errorf("scrape after the push:\n%s", text)
	}
	for k := range family(got, "packet_steering_info") {
		if s := got[k]; s.labels["mode"] != "legacy" || s.labels["source"] != "packet_steering" {
			t.Errorf("scrape after the push: %s", k)
		}
	}

	// The report a fleet collects, replayed elsewhere.
	dir := t.TempDir()
	rep, err := exec.Command(binary(t), "report", "--root", w.root, "--socket", w.sock).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	file := filepath.Join(dir, "report.json")
	if err := os.WriteFile(file, rep, 0o644); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Report struct{ From string }   `json:"report"`
		Status map[string]any          `json:"status"`
		Plan   map[string]any          `json:"plan"`
		Queues struct{ Devices []any } `json:"queues"`
		CPUs   []any                   `json:"cpus"`
	}
	if err := json.Unmarshal(rep, &r); err != nil {
		t.Fatal(err)
	}
	if r.Report.From != "daemon" || r.Status["mode"] != "legacy" || r.Plan["mode"] != "legacy" || len(r.Queues.Devices) == 0 || len(r.CPUs) != 4 {
		t.Errorf("report: from %q, status mode %v, plan mode %v, %d devices, %d cpus", r.Report.From, r.Status["mode"], r.Plan["mode"], len(r.Queues.Devices), len(r.CPUs))
	}
	replay, err := exec.Command(binary(t), "plan", "--snapshot", file, "--json").Output()
	if err != nil {
		t.Fatalf("plan --snapshot report.json: %v", err)
	}
	live, err := exec.Command(binary(t), "plan", "--root", w.root, "--json").Output()
	if err != nil {
		t.Fatalf("plan --root: %v", err)
	}
	var a, b any
	json.Unmarshal(replay, &a)
	json.Unmarshal(live, &b)
	if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
		t.Errorf("plan --snapshot report.json differs from plan on the machine:\n%s\n%s", ja, jb)
	}
	planned, _ := json.Marshal(r.Plan)
	if ja := mustJSON(t, a); ja != mustJSON(t, jsonAny(t, planned)) {
		t.Errorf("the report's plan differs from its replay:\n%s\n%s", planned, ja)
	}

	// A pushed file that does not parse: nothing changes, the error shows.
	push("config globals 'globals'\n\toption mode 'legacy\n")
	st = w.mustCall(t, "status")
	if st["mode"] != "legacy" || st["in_sync"] != true {
		t.Errorf("after a broken push: mode %v in_sync %v (the last good settings must be kept)", st["mode"], st["in_sync"])
	}
	text, _ = scrapeLua(t, w, ubusStandIn(t, w.sock))
	got = parseScrape(t, text)
	if v := got["packet_steering_config_errors"].value; v != 1 {
		t.Errorf("packet_steering_config_errors = %v after a broken push, want 1", v)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
