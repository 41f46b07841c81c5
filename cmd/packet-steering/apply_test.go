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

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// cliRoot is a fixture root with one device, eth0, named in a `config
// device` section so that every mode manages it, and its queue knobs.
func cliRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/config/packet_steering":                               "config globals 'globals'\n\toption mode 'custom'\n\nconfig device\n\toption name 'eth0'\n\toption rps_cpus '2'\n",
		"etc/config/network":                                       "config globals 'globals'\n\toption packet_steering '1'\n",
		"sys/devices/virtual/net/eth0/queues/rx-0/rps_cpus":        "0\n",
		"sys/devices/virtual/net/eth0/queues/rx-0/rps_flow_cnt":    "0\n",
		"sys/devices/virtual/net/eth0/queues/tx-0/xps_cpus":        "0\n",
		"sys/devices/virtual/net/eth0/ifindex":                     "2\n",
		"sys/devices/virtual/net/eth0/operstate":                   "up\n",
		"sys/devices/virtual/net/eth0/threaded":                    "0\n",
		"sys/devices/system/cpu/online":                            "0-1\n",
		"sys/devices/system/cpu/possible":                          "0-1\n",
		"sys/devices/system/cpu/present":                           "0-1\n",
		"sys/devices/system/cpu/cpu0/topology/core_id":             "0\n",
		"sys/devices/system/cpu/cpu1/topology/core_id":             "1\n",
		"sys/devices/system/cpu/cpu0/topology/physical_package_id": "0\n",
		"sys/devices/system/cpu/cpu1/topology/physical_package_id": "0\n",
		"sys/devices/system/cpu/cpu1/online":                       "1\n",
		"proc/net/softnet_stat":                                    "00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000005 00000000 00000000 00000000\n00000020 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001\n",
	}
	links := map[string]string{
		"sys/class/net/eth0":       "../../devices/virtual/net/eth0",
		"sys/bus/cpu/devices/cpu0": "../../../devices/system/cpu/cpu0",
		"sys/bus/cpu/devices/cpu1": "../../../devices/system/cpu/cpu1",
	}
	testenv.WriteTree(t, root, files)
	testenv.WriteLinks(t, root, links)
	return root
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, args)
	return code, out.String(), errb.String()
}

func rpsOf(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestApplyCommand(t *testing.T) {
	root := cliRoot(t)

	// Bad input: exit 2, a message, nothing written (not even a lock file).
	for _, args := range [][]string{
		{"apply", "--root", root, "--bogus"},
		{"apply", "--root", root, "extra"},
		{"apply", "--root", root, "--device", "eth9"},
		{"apply", "--root", root, "--device", "../x"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, stderr)
		}
	}
	if rpsOf(t, root) != "0" {
		t.Fatalf("bad input wrote rps_cpus")
	}
	missing := filepath.Join(root, "no-such-root")
	if code, _, stderr := runCLI(t, "apply", "--root", missing); code != 2 || !strings.Contains(stderr, "no-such-root") {
		t.Errorf("missing root: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("apply created the missing root")
	}
	if _, err := os.Stat(filepath.Join(root, "var/lock")); err == nil {
		t.Errorf("bad input created the lock directory")
	}

	code, stdout, stderr := runCLI(t, "apply", "--root", root, "--dry-run")
	if code != 0 || !strings.Contains(stdout, "would change") || rpsOf(t, root) != "0" {
		t.Fatalf("dry run: exit %d, rps %s\n%s%s", code, rpsOf(t, root), stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, "apply", "--root", root, "--reason", "test", "--json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	var res steering.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if res.Mode != plan.ModeCustom || len(res.Changed) == 0 || len(res.Failed) != 0 {
		t.Fatalf("result %+v", res)
	}
	if !cpuset.SameMask(rpsOf(t, root), "2") {
		t.Fatalf("rps_cpus %s after apply, want the custom 2", rpsOf(t, root))
	}

	code, stdout, _ = runCLI(t, "apply", "--root", root, "--device", "eth0")
	if code != 0 || !strings.HasPrefix(stdout, "mode custom: 0 changed") {
		t.Fatalf("second apply: exit %d\n%s", code, stdout)
	}
}

func TestApplyCommandFailureExit(t *testing.T) {
	root := cliRoot(t)
	// A directory where the knob file should be: the write fails with
	// EISDIR, the device is rolled back, the exit status says so.
	p := filepath.Join(root, "sys/devices/virtual/net/eth0/queues/rx-0/rps_cpus")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "apply", "--root", root)
	if code != 1 || !strings.Contains(stdout, "failed") || !strings.Contains(stderr, "failed") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

func TestStatusCommand(t *testing.T) {
	root := cliRoot(t)
	code, stdout, stderr := runCLI(t, "status", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"mode", "custom (from /etc/config/packet_steering, flows 0)", "in sync", "no (run", "cpu", "processed", "time_squeeze", "rps_received"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, _ := runCLI(t, "apply", "--root", root); code != 0 {
		t.Fatal("apply failed")
	}
	code, stdout, _ = runCLI(t, "status", "--root", root, "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var st steering.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if !st.InSync || st.Mode != plan.ModeCustom || len(st.CPUs) != 2 || st.CPUs[0].Processed != 16 || st.CPUs[1].RPSReceived != 0 {
		t.Errorf("status %+v", st)
	}
	if code, _, stderr := runCLI(t, "status", "--root", root, "--mode", "off"); code != 2 || stderr == "" {
		t.Errorf("unknown flag: exit %d", code)
	}
	if code, _, stderr := runCLI(t, "status", "--root", filepath.Join(root, "nope")); code != 2 || !strings.Contains(stderr, "nope") {
		t.Errorf("missing root: exit %d, stderr %q", code, stderr)
	}
}

// TestApplySyslog: `apply --syslog` (what the init and hotplug scripts run
// where no daemon serves) logs its apply to the system log as the daemon
// does: a change at info, nothing to do at debug (not sent), a failure at
// err; without --syslog, or with --dry-run, nothing is sent.
func TestApplySyslog(t *testing.T) {
	root := cliRoot(t)
	l, path, tag := testenv.ListenSyslog(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // prefix of the one record sent; "" none
	}{
		{"dry run", []string{"--dry-run", "--syslog"}, 0, ""},
		// writes rps_cpus, so the next case has nothing to do
		{"no --syslog", []string{"--reason", "x"}, 0, ""},
		{"nothing to do", []string{"--reason", "hotplug", "--syslog"}, 0, ""},
		{"a change", []string{"--reason", "hotplug", "--syslog"}, 0, "<30>" + tag + "applied reason=hotplug mode=custom changed=1 "},
		{"a failure", []string{"--reason", "hotplug", "--device", "eth9", "--syslog"}, 2, "<27>" + tag + "apply failed reason=hotplug err="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a change" {
				if err := os.WriteFile(filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus"), []byte("0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), syslogPath: path}
			if code := run(context.Background(), env, append([]string{"apply", "--root", root}, tc.args...)); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errb.String())
			}
			buf := make([]byte, 4096)
			_ = l.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := l.Read(buf)
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("sent %q, want nothing", buf[:n])
			case tc.want != "" && err != nil:
				t.Errorf("nothing sent (%v), want %q...", err, tc.want)
			case tc.want != "" && !strings.HasPrefix(string(buf[:n]), tc.want):
				t.Errorf("sent %q, want %q...", buf[:n], tc.want)
			}
		})
	}
}

// TestApplySyslogWithoutSocket: no syslog socket: the apply still runs and
// says on stderr that it was not logged.
func TestApplySyslogWithoutSocket(t *testing.T) {
	root := cliRoot(t)
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), syslogPath: filepath.Join(t.TempDir(), "none")}
	if code := run(context.Background(), env, []string{"apply", "--root", root, "--syslog"}); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, errb.String())
	}
	if rpsOf(t, root) != "2" {
		t.Errorf("rps_cpus %q, want 2", rpsOf(t, root))
	}
	if !strings.Contains(errb.String(), "not logged") {
		t.Errorf("stderr %q, want a note that the apply was not logged", errb.String())
	}
}
