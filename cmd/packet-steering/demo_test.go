//go:build !router

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/cmd/packet-steering/internal/demorun"
	"github.com/packet-steering/packet-steering/platform/fixture"
)

// demoOutput is a stdout the demo writes from its goroutine while the test
// reads it.
type demoOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *demoOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *demoOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

var (
	demoURLLine  = regexp.MustCompile(`open\s+(http://127\.0\.0\.1:\d+/)`)
	demoRootLine = regexp.MustCompile(`a simulated router in (\S+)/root\n`)
)

// startDemoCmd runs `packet-steering demo args...` in-process until the test
// cancels it, and returns its URL and directory.
func startDemoCmd(t *testing.T, args ...string) (url, dir string, out *demoOutput, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &demoOutput{}
	var errOut demoOutput
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cliEnv{stdout: out, stderr: &errOut, stdin: strings.NewReader("")}, append([]string{"demo"}, args...))
	}()
	var code int
	stopped := false
	stop = func() int {
		if !stopped {
			cancel()
			select {
			case code = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("demo did not stop within 15 s of cancel")
			}
			stopped = true
		}
		return code
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := demoURLLine.FindStringSubmatch(out.String()); m != nil {
			d := demoRootLine.FindStringSubmatch(out.String())
			if d == nil {
				t.Fatalf("demo printed no root line:\n%s", out)
			}
			return m[1], d[1], out, stop
		}
		select {
		case code := <-done:
			t.Fatalf("demo exited with %d before serving:\n%s%s", code, out, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("demo printed no URL within 20 s:\n%s%s", out, errOut.String())
	return "", "", nil, nil
}

func postUbus(t *testing.T, url, body string) map[string]any {
	t.Helper()
	resp, err := http.Post(url+"ubus", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("/ubus reply %s: %v", b, err)
	}
	return m
}

// loginUbus logs user in through the demo's /ubus (session login as the
// anonymous caller, as LuCI does) and returns the session id.
func loginUbus(t testing.TB, url, user string) string {
	t.Helper()
	resp, err := http.Post(url+"ubus", "application/json", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"call","params":["00000000000000000000000000000000","session","login",{"username":"`+user+`","password":""}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Result []json.RawMessage `json:"result"`
	}
	var data struct {
		SID string `json:"ubus_rpc_session"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Result) != 2 || json.Unmarshal(r.Result[1], &data) != nil || data.SID == "" {
		t.Fatalf("session login %s: %v %v", user, r, err)
	}
	return data.SID
}

func TestDemoServesAndCleansUp(t *testing.T) {
	url, dir, out, stop := startDemoCmd(t, "--port", "0")
	if _, err := os.Stat(filepath.Join(dir, "root", "sys", "class", "net", "eth0")); err != nil {
		t.Fatalf("demo root: %v", err)
	}
	for _, want := range []string{"call --socket " + filepath.Join(dir, "ubus.sock") + " status", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("intro lacks %q:\n%s", want, out)
		}
	}

	// /ubus speaks uhttpd's JSON-RPC to the packet_steering object, for a
	// session from a login; the anonymous session is denied.
	anon := postUbus(t, url, `{"jsonrpc":"2.0","id":6,"method":"call","params":["00000000000000000000000000000000","packet_steering","status",{}]}`)
	if e, _ := anon["error"].(map[string]any); e == nil || e["code"] != float64(-32002) {
		t.Errorf("status with the anonymous session: %v, want error -32002", anon)
	}
	root := loginUbus(t, url, "root")
	st := postUbus(t, url, `{"jsonrpc":"2.0","id":7,"method":"call","params":["`+root+`","packet_steering","status",{}]}`)
	res, _ := st["result"].([]any)
	if st["id"] != float64(7) || len(res) != 2 || res[0] != float64(0) {
		t.Fatalf("status reply %v", st)
	}
	data, _ := res[1].(map[string]any)
	plat, _ := data["platform"].(map[string]any)
	if data["mode"] != "auto" || data["in_sync"] != true || plat["cpus"] != float64(4) {
		t.Errorf("status data %v: want mode auto, in sync (the demo applies at start), 4 CPUs", data)
	}
	// The read-only user may read but not write (acl.d read vs write).
	viewer := loginUbus(t, url, "viewer")
	if r := postUbus(t, url, `{"jsonrpc":"2.0","id":8,"method":"call","params":["`+viewer+`","packet_steering","status",{}]}`); r["result"] == nil {
		t.Errorf("status as viewer: %v", r)
	}
	denied := postUbus(t, url, `{"jsonrpc":"2.0","id":8,"method":"call","params":["`+viewer+`","packet_steering","set_mode",{"mode":"off"}]}`)
	if e, _ := denied["error"].(map[string]any); e == nil || e["code"] != float64(-32002) {
		t.Errorf("set_mode as viewer: %v, want error -32002", denied)
	}
	list := postUbus(t, url, `{"jsonrpc":"2.0","id":9,"method":"list","params":["packet_steering"]}`)
	sig, _ := list["result"].(map[string]any)["packet_steering"].(map[string]any)
	if sm, _ := sig["set_mode"].(map[string]any); sm["mode"] != "string" || sm["flows"] != "number" || sm["persist"] != "boolean" {
		t.Errorf("list signature %v", list)
	}

	// The page and the view are served.
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `"view":"packet-steering/overview"`) {
		t.Errorf("GET %s: %d %.300s", url, resp.StatusCode, page)
	}

	if code := stop(); code != 0 {
		t.Errorf("demo exit status %d, want 0:\n%s", code, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s still there after Ctrl-C (stat: %v)", dir, err)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("%s still answers after the demo stopped", url)
	}
}

func TestDemoKeepsGivenDir(t *testing.T) {
	given := filepath.Join(t.TempDir(), "d")
	url, dir, _, stop := startDemoCmd(t, "--port", "0", "--dir", given)
	if dir != given {
		t.Errorf("demo dir %s, want %s", dir, given)
	}
	set := postUbus(t, url, `{"jsonrpc":"2.0","id":1,"method":"list"}`)
	if paths, _ := set["result"].([]any); len(paths) == 0 {
		t.Errorf("list: %v", set)
	}
	// The simulated load moves the softnet counters the page shows.
	sid := loginUbus(t, url, "root")
	processed := func() float64 {
		st := postUbus(t, url, `{"jsonrpc":"2.0","id":2,"method":"call","params":["`+sid+`","packet_steering","status",{}]}`)
		res, _ := st["result"].([]any)
		if len(res) != 2 {
			t.Fatalf("status: %v", st)
		}
		sum := 0.0
		for _, c := range res[1].(map[string]any)["cpus"].([]any) {
			sum += c.(map[string]any)["processed"].(float64)
		}
		return sum
	}
	first := processed()
	for deadline := time.Now().Add(5 * time.Second); processed() == first; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("softnet counters did not move within 5 s of simulated load")
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(given, "root", "sys")); err != nil {
		t.Errorf("--dir %s not kept: %v", given, err)
	}
	if _, err := os.Stat(filepath.Join(given, "ubus.sock")); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}

	// A second demo on the same directory refuses to reuse the root.
	var errOut demoOutput
	code := run(context.Background(), &cliEnv{stdout: io.Discard, stderr: &errOut}, []string{"demo", "--port", "0", "--dir", given})
	if code != 1 || !strings.Contains(errOut.String(), "exists") {
		t.Errorf("second demo on %s: exit %d, stderr %q", given, code, errOut.String())
	}
}

func TestDemoUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--port", "70000"}, 2, "--port 70000"},
		{[]string{"--pps", "-1"}, 2, "--pps -1"},
		{[]string{"--preset", "nope"}, 2, `--preset "nope": want one of`},
		{[]string{"--bogus"}, 2, "bogus"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-h"}, 0, "usage: packet-steering demo"},
	}
	for _, tt := range tests {
		var errOut demoOutput
		code := run(context.Background(), &cliEnv{stdout: io.Discard, stderr: &errOut}, append([]string{"demo"}, tt.args...))
		if code != tt.code || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("demo %v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut.String(), tt.code, tt.want)
		}
	}
}

// Every router shape the fixtures model comes up in the demo, and the page's
// two read methods answer through /ubus.
func TestDemoPresets(t *testing.T) {
	for _, name := range fixture.PresetNames() {
		t.Run(name, func(t *testing.T) {
			d, err := demorun.Start(context.Background(), demorun.Config{Dir: filepath.Join(t.TempDir(), "d"), PPS: 0, Preset: name, Log: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := d.Stop(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			sid := loginUbus(t, d.URL, "viewer")
			for _, method := range []string{"status", "get_queues"} {
				r := postUbus(t, d.URL, `{"jsonrpc":"2.0","id":1,"method":"call","params":["`+sid+`","packet_steering","`+method+`",{}]}`)
				res, _ := r["result"].([]any)
				if len(res) != 2 || res[0] != float64(0) {
					t.Errorf("%s on %s: %v", method, name, r)
				}
			}
		})
	}
}

// BenchmarkDemoUbusStatus is one LuCI status call through the demo's HTTP
// /ubus bridge, the broker and the packet_steering object on the demo router.
func BenchmarkDemoUbusStatus(b *testing.B) {
	d, err := demorun.Start(context.Background(), demorun.Config{Dir: filepath.Join(b.TempDir(), "d"), PPS: 0, Preset: "demo", Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Stop()
	body := `{"jsonrpc":"2.0","id":1,"method":"call","params":["` + loginUbus(b, d.URL, "root") + `","packet_steering","status",{}]}`
	client := &http.Client{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Post(d.URL+"ubus", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.HasPrefix(out, []byte(`{"jsonrpc":"2.0","id":1,"result":[0,`)) {
			b.Fatalf("reply %.200s", out)
		}
	}
}

// The demo runs the real daemon: set_mode adaptive through the page's
// /ubus starts the adaptive control loop, as on a router, and status shows
// it sampling; set_mode auto stops it.
func TestDemoRunsAdaptiveLoop(t *testing.T) {
	log := &demoOutput{}
	d, err := demorun.Start(context.Background(), demorun.Config{Dir: filepath.Join(t.TempDir(), "d"), PPS: 1000, Preset: "demo", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	sid := loginUbus(t, d.URL, "root")
	call := func(method, args string) map[string]any {
		t.Helper()
		r := postUbus(t, d.URL, `{"jsonrpc":"2.0","id":1,"method":"call","params":["`+sid+`","packet_steering","`+method+`",`+args+`]}`)
		res, _ := r["result"].([]any)
		if len(res) != 2 || res[0] != float64(0) {
			t.Fatalf("%s %s: %v", method, args, r)
		}
		m, _ := res[1].(map[string]any)
		return m
	}
	call("set_mode", `{"mode":"adaptive","persist":false}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := call("status", "{}")
		ad, _ := st["adaptive"].(map[string]any)
		smp, _ := ad["sampling"].(map[string]any)
		if smp["running"] == true && smp["wakeups"].(float64) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no adaptive loop sampling in the demo: status %v\nlog:\n%s", st, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "adaptive loop started") {
		t.Errorf("the daemon's log does not show the loop:\n%s", log.String())
	}
	call("set_mode", `{"mode":"auto","persist":false}`)
	if st := call("status", "{}"); st["adaptive"] != nil {
		t.Errorf("status in auto still has adaptive: %v", st["adaptive"])
	}
	if !strings.Contains(log.String(), "adaptive loop stopped") {
		t.Errorf("the loop did not stop in auto:\n%s", log.String())
	}
}
