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
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--target", "198.18.0.2"}, ""},
		{[]string{"--target", "198.18.0.2", "-u", "-b", "900M", "-l", "1200", "--bidir", "-t", "10", "-P", "4", "--metric", "loss"}, ""},
		{[]string{}, "--target HOST is required"},
		{[]string{"--target", "198.18.0.2", "--metric", "loss"}, "needs --udp"},
		{[]string{"--target", "198.18.0.2", "-u", "--metric", "retransmits"}, "needs TCP"},
		{[]string{"--target", "198.18.0.2", "--metric", "speed"}, "want throughput"},
		{[]string{"--target", "198.18.0.2", "-t", "0"}, "--time"},
		{[]string{"--target", "198.18.0.2", "-P", "0"}, "--parallel"},
		{[]string{"--target", "198.18.0.2", "--port", "70000"}, "--port"},
		{[]string{"--target", "198.18.0.2", "--cport", "65530"}, "--cport"},
		{[]string{"--target", "198.18.0.2", "--max-configs", "0"}, "--max-configs"},
		{[]string{"--target", "198.18.0.2", "--max-duration", "0s"}, "--max-duration"},
		{[]string{"--target", "198.18.0.2", "--bidir", "-R"}, "exclude each other"},
		{[]string{"--target", "198.18.0.2", "--candidates", "off", "--devices", "eth0"}, "--devices only"},
		{[]string{"--target", "198.18.0.2", "--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := ParseFlags(tt.args, io.Discard)
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
			ip, err := ResolveTarget(tt.root, tt.in)
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
		rep  Report
		want string
	}{
		{"nothing measured", Report{}, "nothing to save"},
		{"restore not verified", Report{Recommendation: Recommendation{Candidate: "auto", Clear: true}}, "restore was not verified"},
		{"tie", Report{Recommendation: Recommendation{Candidate: "off", Best: "off", Tied: []string{"eth0:2"}},
			Restore: RestoreResult{Verified: true}}, "tied with eth0:2"},
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
	spec, ok := fixture.Preset(preset)
	if !ok {
		t.Fatalf("no preset %s", preset)
	}
	if spec.Files == nil {
		spec.Files = map[string]string{}
	}
	spec.Files["proc/softirqs"] = "CPU0 CPU1\nNET_RX: 10 20\n"
	spec.Files["proc/stat"] = "cpu 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 3 0\ncpu1 0 0 0 0 0 0 4 0\n"
	root := t.TempDir()
	if err := fixture.Build(root, spec); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestMainOnFixture(t *testing.T) {
	root := fixtureWithCounters(t, "bcm53xx")
	before := digest(t, root)
	var out, errb bytes.Buffer
	err := Main(context.Background(), []string{"--root", root, "--target", "198.18.0.2",
		"--load", `echo "{\"bps\": $((PS_TUNE_RUN + 1))000000}"`, "--load-time", "100ms",
		"--runs", "2", "--settle", "0s", "--candidates", "off;auto;eth0:2/br-lan:1", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || !rep.Restore.Verified || len(rep.Results) != 3 {
		t.Fatalf("report: complete %v restore %+v results %d", rep.Complete, rep.Restore, len(rep.Results))
	}
	if r := rep.Results[2]; r.Throughput != (Summary{Median: 1.5e6, Min: 1e6, Max: 2e6, N: 2}) || r.Unit != UnitBPS {
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
	err := Main(context.Background(), []string{"--root", root, "--target", "198.18.0.2",
		"--load", "sleep 30; echo 1", "--load-time", "100ms", "--runs", "1", "--settle", "0s",
		"--candidates", "off;eth0:2", "--max-duration", "1s"}, &out, &errb)
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
