package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

func TestOptionsCheck(t *testing.T) {
	base := func(f func(o *Options)) Options {
		o := DefaultOptions()
		o.Target = "198.18.0.2"
		f(&o)
		return o
	}
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"defaults", base(func(*Options) {}), ""},
		{"udp loss", base(func(o *Options) { o.UDP, o.Bitrate, o.Length, o.Metric = true, "900M", 1200, "loss" }), ""},
		{"no target", DefaultOptions(), "--target HOST is required"},
		{"loss over tcp", base(func(o *Options) { o.Metric = "loss" }), "needs --udp"},
		{"retransmits over udp", base(func(o *Options) { o.UDP, o.Metric = true, "retransmits" }), "needs TCP"},
		{"unknown metric", base(func(o *Options) { o.Metric = "speed" }), "want throughput"},
		{"time 0", base(func(o *Options) { o.Seconds = 0 }), "--time"},
		{"parallel 0", base(func(o *Options) { o.Parallel = 0 }), "--parallel"},
		{"port", base(func(o *Options) { o.Port = 70000 }), "--port"},
		{"cport", base(func(o *Options) { o.CPort = 65530 }), "--cport"},
		{"max-configs", base(func(o *Options) { o.MaxConfigs = 0 }), "--max-configs"},
		{"max-duration", base(func(o *Options) { o.MaxDuration = 0 }), "--max-duration"},
		{"bidir and reverse", base(func(o *Options) { o.Bidir, o.Reverse = true, true }), "exclude each other"},
		{"devices with candidates", base(func(o *Options) { o.Candidates, o.Devices = "off", "eth0" }), "--devices only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Check()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want a usage error saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveTarget(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := "# comment\n127.0.0.1 localhost\n198.18.0.9\tserver Lanhost # the iperf3 server\nbogus line\n::ffff:198.18.0.10 mapped\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		root, in, want, wantErr string
	}{
		{root, "198.18.0.2", "198.18.0.2", ""},
		{root, "2001:db8::1", "2001:db8::1", ""},
		{root, "::ffff:198.18.0.3", "198.18.0.3", ""},
		{root, "0.0.0.0", "", "unspecified"},
		{root, "::", "", "unspecified"},
		{root, "255.255.255.255", "", "more than one host"},
		{root, "224.0.0.1", "", "more than one host"},
		{root, "ff02::1", "", "more than one host"},
		{root, "127.0.0.1", "", "loopback"},
		{root, "localhost", "", "loopback"},
		{root, "server", "198.18.0.9", ""},
		{root, "lanhost", "198.18.0.9", ""},
		{root, "mapped", "198.18.0.10", ""},
		{root, "bogus", "", "neither an IP address nor a name in /etc/hosts"},
		{root, "no-such-host.invalid", "", "neither an IP address nor a name in /etc/hosts"},
		{t.TempDir(), "server", "", "neither an IP address nor a name in /etc/hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ip, err := resolveTarget(tt.root, tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUsage) {
					t.Fatalf("got %v, %v; want usage error %q", ip, err, tt.wantErr)
				}
				return
			}
			if err != nil || ip.String() != tt.want {
				t.Errorf("got %v, %v; want %s", ip, err, tt.want)
			}
		})
	}
}

func TestSaveRefusesTiesAndUnverifiedRestores(t *testing.T) {
	o := &Options{Root: t.TempDir()}
	tests := []struct {
		name string
		rep  report
		want string
	}{
		{"nothing measured", report{}, "nothing to save"},
		{"restore not verified", report{Recommendation: recommendation{Candidate: "auto", Clear: true}}, "restore was not verified"},
		{"tie", report{Recommendation: recommendation{Candidate: "off", Best: "off", Tied: []string{"eth0:2"}},
			Restore: restoreResult{Verified: true}}, "tied with eth0:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A nil engine: the refusal must come before anything is written.
			err := o.save(context.Background(), nil, &tt.rep, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// fixtureWithCounters builds a preset root that also has the /proc files
// ReadCounters needs, so the whole command runs on it.
func fixtureWithCounters(t *testing.T, preset string) string {
	t.Helper()
	return fixturetest.Root(t, preset, func(spec *fixture.Spec) {
		if spec.Files == nil {
			spec.Files = map[string]string{}
		}
		spec.Files["proc/softirqs"] = "CPU0 CPU1\nNET_RX: 10 20\n"
		spec.Files["proc/stat"] = "cpu 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 3 0\ncpu1 0 0 0 0 0 0 4 0\n"
	})
}

func TestMainOnFixture(t *testing.T) {
	root := fixtureWithCounters(t, "bcm53xx")
	before := digest(t, root)
	var out, errb bytes.Buffer
	o := DefaultOptions()
	o.Root, o.Target = root, "198.18.0.2"
	o.LoadCmd, o.LoadTime = `echo "{\"bps\": $((PS_TUNE_RUN + 1))000000}"`, 100*time.Millisecond
	o.Runs, o.Settle, o.Candidates, o.JSON = 2, 0, "off;auto;eth0:2/br-lan:1", true
	err := o.Run(context.Background(), &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || !rep.Restore.Verified || len(rep.Results) != 3 {
		t.Fatalf("report: complete %v restore %+v results %d", rep.Complete, rep.Restore, len(rep.Results))
	}
	if r := rep.Results[2]; r.Throughput != (summary{Median: 1.5e6, Min: 1e6, Max: 2e6, N: 2}) || r.Unit != unitBPS {
		t.Errorf("throughput %+v %s", r.Throughput, r.Unit)
	}
	// Every candidate measured the same: all tied, auto kept.
	if rep.Recommendation.Candidate != "auto" || !rep.Recommendation.Clear {
		t.Errorf("recommendation %+v", rep.Recommendation)
	}
	diffDigest(t, before, digest(t, root))
}

func TestMainStopsAtMaxDuration(t *testing.T) {
	root := fixtureWithCounters(t, "bcm53xx")
	before := digest(t, root)
	var out, errb bytes.Buffer
	start := time.Now()
	// The command claims 100ms per run but takes 30s: the limit stops it.
	o := DefaultOptions()
	o.Root, o.Target = root, "198.18.0.2"
	o.LoadCmd, o.LoadTime, o.Runs, o.Settle = "sleep 30; echo 1", 100*time.Millisecond, 1, 0
	o.Candidates, o.MaxDuration = "off;eth0:2", time.Second
	err := o.Run(context.Background(), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--max-duration 1s reached") {
		t.Fatalf("err = %v\n%s", err, errb.String())
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if !strings.Contains(out.String(), "restore: ") || !strings.Contains(out.String(), "did not complete") {
		t.Errorf("partial table missing:\n%s", out.String())
	}
	diffDigest(t, before, digest(t, root))
}
