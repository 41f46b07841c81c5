package tune

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fp(v float64) *float64 { return &v }

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "iperf3", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseIperf(t *testing.T) {
	tests := []struct {
		file string
		want measurement
	}{
		{"tcp.json", measurement{Throughput: 39252965488.5605, Unit: unitBPS, Retransmits: fp(0)}},
		{"tcp_bidir.json", measurement{Throughput: 30397746928.653564 + 9296210005.499723, Unit: unitBPS, Retransmits: fp(1466 + 58)}},
		{"udp.json", measurement{Throughput: 99901510.34141415, Unit: unitBPS, LossPercent: fp(0)}},
		{"udp_bidir.json", measurement{Throughput: 99904811.4226293 * 2, Unit: unitBPS, LossPercent: fp(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, host, err := parseIperf(readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if host != "198.18.250.2" {
				t.Errorf("host = %q", host)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v (loss %v retr %v), want %+v", got, deref(got.LossPercent), deref(got.Retransmits), tt.want)
			}
		})
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestParseIperfLossAndErrors(t *testing.T) {
	// The worse direction's loss is kept; an old iperf3 UDP report with
	// only "sum" and no lost_percent computes it from the packet counts.
	in := `{"start":{"connecting_to":{"host":"198.18.0.2"},"test_start":{"protocol":"UDP"}},
	"end":{"sum":{"bits_per_second":100,"lost_packets":5,"packets":100},
	"sum_bidir_reverse":{"bits_per_second":50,"lost_percent":2.5}}}`
	m, _, err := parseIperf([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.Throughput != 150 || m.LossPercent == nil || *m.LossPercent != 5 {
		t.Errorf("got %+v loss %v", m, deref(m.LossPercent))
	}
	for name, in := range map[string]string{
		"iperf error": `{"start":{"connecting_to":{"host":"198.18.0.2"}},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}`,
		"no sums":     `{"start":{},"end":{}}`,
		"not json":    `iperf3: error`,
	} {
		if _, _, err := parseIperf([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestIperfArgs(t *testing.T) {
	p := &iperf{Host: "198.18.1.2", Port: 5999, UDP: true, Bitrate: "900M", Length: 1200, Bidir: true, Seconds: 2, Parallel: 4, ClientPort: 41000}
	want := "-c 198.18.1.2 -J --connect-timeout 5000 -p 5999 -u -b 900M -l 1200 --bidir -t 2 -P 4 --cport 41026"
	if got := strings.Join(p.Args(2), " "); got != want {
		t.Errorf("args = %q\nwant %q", got, want)
	}
	if got := strings.Join((&iperf{Host: "198.18.1.2"}).Args(0), " "); got != "-c 198.18.1.2 -J --connect-timeout 5000" {
		t.Errorf("minimal args = %q", got)
	}
	if e := (&iperf{}).Estimate(); e != 10*time.Second+runOverhead {
		t.Errorf("default estimate %v", e)
	}
}

// fakeIperf writes a script standing in for iperf3 that records its
// arguments and prints a JSON file.
func fakeIperf(t *testing.T, jsonFile string, exit int) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	data, err := filepath.Abs(filepath.Join("testdata", "iperf3", jsonFile))
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "iperf3")
	script := "#!/bin/sh\necho \"$@\" > '" + argsFile + "'\ncat '" + data + "'\nexit " + string(rune('0'+exit)) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestIperfRun(t *testing.T) {
	bin, argsFile := fakeIperf(t, "tcp.json", 0)
	p := &iperf{Binary: bin, Host: "198.18.250.2", Seconds: 1}
	m, err := p.Run(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Throughput != 39252965488.5605 {
		t.Errorf("throughput %v", m.Throughput)
	}
	args, _ := os.ReadFile(argsFile)
	if !strings.HasPrefix(string(args), "-c 198.18.250.2 -J") {
		t.Errorf("args %q", args)
	}
	// A report from another host than the target is refused.
	p.Host = "198.18.9.9"
	if _, err := p.Run(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "not the target") {
		t.Errorf("other host: err = %v", err)
	}
	// A failing iperf3 without JSON is an error with context.
	bad := filepath.Join(t.TempDir(), "iperf3")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho boom >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p = &iperf{Binary: bad, Host: "198.18.250.2", Seconds: 1}
	if _, err := p.Run(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing iperf3: err = %v", err)
	}
	// Cancellation stops a run.
	slow := filepath.Join(t.TempDir(), "iperf3")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = (&iperf{Binary: slow, Host: "198.18.250.2", Seconds: 1}).Run(ctx, 0)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("cancel: err = %v after %v", err, time.Since(start))
	}
}

func TestParseLoadOutput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    measurement
		wantErr bool
	}{
		{"bps field", `{"bps": 9.4e8, "other": 1}`, measurement{Throughput: 9.4e8, Unit: unitBPS}, false},
		{"value field", `{"value": 12.5}`, measurement{Throughput: 12.5}, false},
		{"last line number", "warming up\nresult:\n  941.2 Mbit/s\n", measurement{Throughput: 941.2}, false},
		{"iperf3 json", string(readTestdata(t, "tcp.json")), measurement{Throughput: 39252965488.5605, Unit: unitBPS, Retransmits: fp(0)}, false},
		{"no number", "done\n", measurement{}, true},
		{"NaN", "NaN\n", measurement{}, true},
		{"empty", "", measurement{}, true},
		{"json without field", `{"x": 1}`, measurement{}, true},
		{"json wrong type", `{"bps": "fast"}`, measurement{}, true},
		{"broken json", `{"bps": `, measurement{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLoadOutput([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCommandRun(t *testing.T) {
	c := &loadCommand{Line: `echo "{\"bps\": $((PS_TUNE_RUN * 10 + 1))}"; test "$PS_TUNE_TARGET" = 198.18.0.9`, Target: "198.18.0.9", Expect: time.Second}
	m, err := c.Run(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if m.Throughput != 31 || m.Unit != unitBPS {
		t.Errorf("got %+v", m)
	}
	c = &loadCommand{Line: "echo nope >&2; exit 3", Expect: time.Second}
	if _, err := c.Run(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("failing command: err = %v", err)
	}
	c = &loadCommand{Line: "sleep 5", Expect: time.Second, Timeout: 100 * time.Millisecond}
	if _, err := c.Run(context.Background(), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: err = %v", err)
	}
}

func TestIperfRetriesBusyServer(t *testing.T) {
	dir := t.TempDir()
	data, err := filepath.Abs(filepath.Join("testdata", "iperf3", "tcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(dir, "count")
	bin := filepath.Join(dir, "iperf3")
	// Busy twice, then a report.
	script := "#!/bin/sh\necho x >> '" + count + "'\n" +
		"if [ $(wc -l < '" + count + "') -le 2 ]; then echo '{\"error\": \"error - the server is busy running a test. try again later\"}'; exit 1; fi\n" +
		"cat '" + data + "'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := (&iperf{Binary: bin, Host: "198.18.250.2", Seconds: 1}).Run(context.Background(), 0)
	if err != nil || m.Throughput == 0 {
		t.Fatalf("got %+v, %v", m, err)
	}
	b, _ := os.ReadFile(count)
	if n := strings.Count(string(b), "x"); n != 3 {
		t.Errorf("%d tries, want 3", n)
	}
}
