package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

// pluginMain lets the test binary be the plugin (TestMain calls it): run
// through a symlink named packet_steering (as rpcd runs
// /usr/libexec/rpcd/packet_steering) it is main's plugin path, with the
// call timeout from the environment instead of pluginCallTimeout.
func pluginMain() int {
	timeout := pluginCallTimeout
	if d, err := time.ParseDuration(os.Getenv("PS_PLUGIN_TIMEOUT")); err == nil {
		timeout = d
	}
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
	return runPlugin(context.Background(), env, os.Args[1:], pluginConfig{root: pluginRoot(), timeout: timeout})
}

// pluginExe is the test binary under the plugin's name.
func pluginExe(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), pluginName)
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// setDaemonOption writes packet_steering.globals.daemon into root's config
// ("" removes the file's option by leaving it out).
func setDaemonOption(t *testing.T, root, v string) {
	t.Helper()
	conf := "\nconfig globals 'globals'\n\toption mode 'auto'\n"
	if v != "" {
		conf += "\toption daemon '" + v + "'\n"
	}
	if err := os.WriteFile(filepath.Join(root, "etc/config/packet_steering"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// execPlugin runs the plugin as rpcd does: `list` with stdin and stderr on
// /dev/null; `call METHOD` with the arguments on stdin, closed after them.
// It returns stdout and the exit status.
func execPlugin(t *testing.T, exe, root, timeout, stdin string, args ...string) ([]byte, int, string) {
	t.Helper()
	cmd := testenv.Command(exe, args...)
	cmd.Env = append(os.Environ(), pluginRootEnv+"="+root, "PS_PLUGIN_TIMEOUT="+timeout)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), code, errb.String()
}

// rpcdStatus is the status rpcd replies for a call's output
// (rpc_plugin_call_finish_cb in openwrt/rpcd plugin.c, checked against the
// stock rpcd): a JSON object is the reply, null or no output NO_DATA,
// anything else INVALID_ARGUMENT.
func rpcdStatus(out []byte) (map[string]any, ubus.Status) {
	s := bytes.TrimSpace(out)
	if len(s) == 0 || string(s) == "null" {
		return nil, ubus.StatusNoData
	}
	var v map[string]any
	if len(s) == 0 || s[0] != '{' || json.Unmarshal(s, &v) != nil {
		return nil, ubus.StatusInvalidArgument
	}
	return v, ubus.StatusOK
}

// The owner decides what `list` registers: the methods on a single-CPU
// router or with daemon 0; nothing (so the daemon can register) on a
// multi-CPU router or with daemon 1.
func TestPluginListOwner(t *testing.T) {
	exe := pluginExe(t)
	tests := []struct {
		preset, option string
		want           steering.Server
		recorded       string // the init script's record (steering.OwnerFile); "" none
		lists          bool   // whether list registers the methods
	}{
		{"bcm47081", "", steering.ServerRPCD, "", true},
		{"bcm47081", "", steering.ServerRPCD, "rpcd", true},
		{"bcm47081", "", steering.ServerRPCD, "stopped", false},
		{"demo", "0", steering.ServerRPCD, "daemon", false}, // changed, not yet restarted
		{"demo", "", steering.ServerDaemon, "rpcd", true},   // likewise
		{"bcm47081", "auto", steering.ServerRPCD, "", true},
		{"bcm47081", "1", steering.ServerDaemon, "", false},
		{"demo", "", steering.ServerDaemon, "", false},
		{"demo", "0", steering.ServerRPCD, "", true},
		{"demo", "yes", steering.ServerDaemon, "", false}, // not understood: auto
	}
	for _, tt := range tests {
		t.Run(tt.preset+" daemon="+tt.option+" recorded="+tt.recorded, func(t *testing.T) {
			root := fixturetest.Root(t, tt.preset, nil)
			setDaemonOption(t, root, tt.option)
			if tt.recorded != "" {
				p := filepath.Join(root, steering.OwnerFile)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tt.recorded+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, code, errOut := execPlugin(t, exe, root, "", "", "list")
			if code != 0 {
				t.Fatalf("list: exit %d: %s", code, errOut)
			}
			var sig map[string]map[string]any
			if err := json.Unmarshal(out, &sig); err != nil {
				t.Fatalf("list output %q: %v", out, err)
			}
			if tt.lists && len(sig) != 4 {
				t.Errorf("list = %s, want the four methods", out)
			}
			if !tt.lists && len(sig) != 0 {
				t.Errorf("list = %s, want {} while rpcd is not to serve the object", out)
			}
			var ob, oe bytes.Buffer
			if code := run(context.Background(), &cliEnv{stdout: &ob, stderr: &oe}, []string{"owner", "--root", root}); code != 0 {
				t.Fatalf("owner: exit %d: %s", code, oe.String())
			}
			if got := strings.TrimSpace(ob.String()); got != string(tt.want) {
				t.Errorf("owner = %q, want %q", got, tt.want)
			}
			// The daemon agrees: it refuses to run where rpcd serves.
			if tt.want == steering.ServerRPCD {
				var eb bytes.Buffer
				code := run(context.Background(), &cliEnv{stdout: &eb, stderr: &eb}, []string{"daemon", "--root", root, "--socket", filepath.Join(root, "none.sock")})
				if code != 1 || !strings.Contains(eb.String(), "rpcd serves packet_steering") {
					t.Errorf("daemon where rpcd serves: exit %d: %s", code, eb.String())
				}
			}
		})
	}
}

// The exec protocol end to end on the single-CPU fixture, through the
// binary under the plugin's name.
func TestPluginExecProtocol(t *testing.T) {
	exe := pluginExe(t)
	root := fixturetest.Root(t, "bcm47081", nil)
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  ubus.Status
		code  int
	}{
		{"status", "{ }", []string{"call", "status"}, ubus.StatusOK, 0},
		{"status, empty stdin", "", []string{"call", "status"}, ubus.StatusOK, 0},
		{"get_queues", `{"device":"eth0"}`, []string{"call", "get_queues"}, ubus.StatusOK, 0},
		{"apply dry run", `{"dry_run":true,"reason":"test"}`, []string{"call", "apply"}, ubus.StatusOK, 0},
		{"bad JSON", `{"dry_run":tru`, []string{"call", "apply"}, ubus.StatusInvalidArgument, 2},
		{"misspelt argument", `{"dryrun":true}`, []string{"call", "apply"}, ubus.StatusInvalidArgument, 2},
		{"unknown device", `{"device":"nope0"}`, []string{"call", "get_queues"}, ubus.StatusInvalidArgument, 2},
		{"unknown method", `{ }`, []string{"call", "reboot"}, ubus.StatusInvalidArgument, 3},
		// Not the protocol (rpcd never runs these): usage, no output.
		{"no method", ``, []string{"call"}, ubus.StatusNoData, 2},
		{"unknown verb", ``, []string{"describe"}, ubus.StatusNoData, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code, errOut := execPlugin(t, exe, root, "", tt.stdin, tt.args...)
			reply, st := rpcdStatus(out)
			if st != tt.want || code != tt.code {
				t.Fatalf("rpcd status %v, exit %d (want %v, %d); stdout %q stderr %q", st, code, tt.want, tt.code, out, errOut)
			}
			if st == ubus.StatusOK && len(reply) == 0 {
				t.Errorf("empty reply %q", out)
			}
			if st != ubus.StatusOK && errOut == "" {
				t.Error("a refused call says nothing on stderr")
			}
		})
	}
	out, _, _ := execPlugin(t, exe, root, "", "{ }", "call", "status")
	st, _ := rpcdStatus(out)
	if svc, _ := st["service"].(map[string]any); svc["served_by"] != "rpcd" || svc["events"] != false {
		t.Errorf("status service = %v, want served_by rpcd, events false", st["service"])
	}
}

// A call that cannot finish (another apply holds the lock) ends by itself
// within its bound, before rpcd would kill it, with NO_DATA and nothing
// changed; once the lock is free the same call works.
func TestPluginCallTimeout(t *testing.T) {
	exe := pluginExe(t)
	root := fixturetest.Root(t, "demo", nil)
	setDaemonOption(t, root, "0")
	lockDir := filepath.Join(root, "var/lock")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(lockDir, steering.LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	before := readKnob(t, root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	start := time.Now()
	out, code, errOut := execPlugin(t, exe, root, "300ms", `{"reason":"blocked"}`, "call", "apply")
	took := time.Since(start)
	if _, st := rpcdStatus(out); st != ubus.StatusNoData || code != int(ubus.StatusUnknownError) {
		t.Errorf("blocked apply: rpcd status %v, exit %d (want NO_DATA, %d); stdout %q stderr %q", st, code, ubus.StatusUnknownError, out, errOut)
	}
	if took > 5*time.Second {
		t.Errorf("blocked apply took %v with a 300ms bound", took)
	}
	if got := readKnob(t, root, "sys/class/net/eth0/queues/rx-0/rps_cpus"); got != before {
		t.Errorf("blocked apply changed rx-0 rps_cpus %s -> %s", before, got)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	out, code, errOut = execPlugin(t, exe, root, "5s", `{"reason":"free"}`, "call", "apply")
	if res, st := rpcdStatus(out); st != ubus.StatusOK || code != 0 {
		t.Fatalf("apply: %v, exit %d: %s", st, code, errOut)
	} else if ch, _ := res["changed"].([]any); len(ch) == 0 {
		t.Errorf("apply on a fresh demo fixture changed nothing: %s", out)
	}
}

// methodCaller calls one method and returns the reply and the status the
// caller sees.
type methodCaller func(t *testing.T, method, args string) (map[string]any, ubus.Status)

// The same method tests against the daemon (on the broker, through `call`)
// and against the plugin (each call a new process, as under rpcd), on the
// same fixture: same replies, same statuses, same persistence.
func TestMethodsDaemonAndPlugin(t *testing.T) {
	servers := map[steering.Server]func(t *testing.T, root string) methodCaller{
		steering.ServerDaemon: func(t *testing.T, root string) methodCaller {
			_, sock := ubustest.Start(t)
			startServing(t, sock, root)
			return func(t *testing.T, method, args string) (map[string]any, ubus.Status) {
				a := []string{method}
				if args != "" {
					a = append(a, args)
				}
				code, out, _ := callCmd(t, sock, a...)
				if code != 0 {
					return nil, ubus.Status(code)
				}
				return decodeReply(t, out), ubus.StatusOK
			}
		},
		steering.ServerRPCD: func(t *testing.T, root string) methodCaller {
			exe := pluginExe(t)
			setDaemonOption(t, root, "0")
			list, _, _ := execPlugin(t, exe, root, "", "", "list")
			var sig map[string]any
			if err := json.Unmarshal(list, &sig); err != nil || len(sig) != 4 {
				t.Fatalf("list = %q", list)
			}
			// The boot apply the init script makes in plugin mode.
			var ob, eb bytes.Buffer
			if code := run(context.Background(), &cliEnv{stdout: &ob, stderr: &eb}, []string{"apply", "--root", root, "--reason", "start"}); code != 0 {
				t.Fatalf("one-shot apply: %s", eb.String())
			}
			return func(t *testing.T, method, args string) (map[string]any, ubus.Status) {
				if _, ok := sig[method]; !ok {
					return nil, ubus.StatusMethodNotFound // the bus refuses it
				}
				if args == "" {
					args = "{ }"
				}
				out, _, _ := execPlugin(t, exe, root, "10s", args, "call", method)
				return rpcdStatus(out)
			}
		},
	}
	for server, start := range servers {
		t.Run(string(server), func(t *testing.T) {
			root := fixturetest.Root(t, "demo", nil)
			c := start(t, root)
			mustCall := func(method, args string) map[string]any {
				t.Helper()
				r, st := c(t, method, args)
				if st != ubus.StatusOK {
					t.Fatalf("%s %s: status %v", method, args, st)
				}
				return r
			}
			st := mustCall("status", "")
			if st["in_sync"] != true || st["mode"] != "auto" || st["policy"] != "qualcommax-ipq807x" {
				t.Errorf("status = %v", st)
			}
			if la, _ := st["last_apply"].(map[string]any); la["reason"] != "start" {
				t.Errorf("last_apply = %v, want the start apply", st["last_apply"])
			}
			if svc, _ := st["service"].(map[string]any); svc["served_by"] != string(server) || svc["events"] != (server == steering.ServerDaemon) {
				t.Errorf("service = %v", st["service"])
			}
			q := mustCall("get_queues", `{"device":"eth0"}`)
			if devs, _ := q["devices"].([]any); len(devs) != 1 {
				t.Errorf("get_queues eth0 = %v", q)
			}
			if r := mustCall("apply", `{"dry_run":true}`); len(r["changed"].([]any)) != 0 {
				t.Errorf("dry run after the start apply: %v", r["changed"])
			}
			sm := mustCall("set_mode", `{"mode":"off","persist":false}`)
			if sm["mode"] != "off" || len(sm["changed"].([]any)) == 0 {
				t.Errorf("set_mode off = %v", sm)
			}
			st = mustCall("status", "")
			if conf, _ := st["configured"].(map[string]any); st["mode"] != "off" || conf["source"] != "live" || st["in_sync"] != true {
				t.Errorf("status after set_mode off (live) = mode %v configured %v in_sync %v", st["mode"], st["configured"], st["in_sync"])
			}
			if r := mustCall("apply", `{"reason":"again"}`); len(r["changed"].([]any)) != 0 {
				t.Errorf("apply after live set_mode off went back to the config: %v", r["changed"])
			}
			mustCall("set_mode", `{"mode":"legacy","flows":128}`)
			conf, err := os.ReadFile(filepath.Join(root, "etc/config/packet_steering"))
			if err != nil || !strings.Contains(string(conf), "'legacy'") || !strings.Contains(string(conf), "'128'") {
				t.Errorf("persisted config: %s (%v)", conf, err)
			}
			st = mustCall("status", "")
			if la, _ := st["last_apply"].(map[string]any); la["reason"] != "set_mode legacy" || st["mode"] != "legacy" {
				t.Errorf("status after set_mode legacy: mode %v last_apply %v", st["mode"], st["last_apply"])
			}
			for _, tt := range []struct {
				method, args string
				want         ubus.Status
			}{
				{"set_mode", `{"mode":"turbo"}`, ubus.StatusInvalidArgument},
				{"set_mode", `{"mode":"auto","flows":-1}`, ubus.StatusInvalidArgument},
				{"set_mode", `{"mode":"auto","flows":"10"}`, ubus.StatusInvalidArgument},
				{"apply", `{"dryrun":true}`, ubus.StatusInvalidArgument},
				{"apply", `{"device":"nope0"}`, ubus.StatusInvalidArgument},
				{"get_queues", `{"device":"../x"}`, ubus.StatusInvalidArgument},
				{"status", `{"verbose":true}`, ubus.StatusInvalidArgument},
				{"reboot", "", ubus.StatusMethodNotFound},
			} {
				if _, got := c(t, tt.method, tt.args); got != tt.want {
					t.Errorf("%s %s: status %v, want %v", tt.method, tt.args, got, tt.want)
				}
			}
			if after, _ := os.ReadFile(filepath.Join(root, "etc/config/packet_steering")); !bytes.Equal(after, conf) {
				t.Errorf("refused calls changed the config:\n%s", after)
			}
		})
	}
}

// The plugin's reply has the daemon's shape, key for key.
func TestPluginStatusShapeMatchesDaemon(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	_, sock := ubustest.Start(t)
	startServing(t, sock, root)
	_, dOut, _ := callCmd(t, sock, "status")
	daemonReply := decodeReply(t, dOut)
	exe := pluginExe(t)
	out, code, errOut := execPlugin(t, exe, root, "5s", "{ }", "call", "status")
	pluginReply, st := rpcdStatus(out)
	if st != ubus.StatusOK || code != 0 {
		t.Fatalf("plugin status: %v %d %s", st, code, errOut)
	}
	keys := func(m map[string]any) string {
		var k []string
		for n := range m {
			if n != "last_apply" { // the daemon's is in its memory, the plugin's in the state file
				k = append(k, n)
			}
		}
		sort.Strings(k)
		return fmt.Sprint(k)
	}
	if keys(daemonReply) != keys(pluginReply) {
		t.Errorf("keys differ:\ndaemon %s\nplugin %s", keys(daemonReply), keys(pluginReply))
	}
	for _, k := range []string{"mode", "policy", "evidence", "in_sync", "offload", "hints", "platform", "configured"} {
		if fmt.Sprint(daemonReply[k]) != fmt.Sprint(pluginReply[k]) {
			t.Errorf("%s: daemon %v, plugin %v", k, daemonReply[k], pluginReply[k])
		}
	}
}
