package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
)

// daemonProcess is `packet-steering daemon` run as a process of its own:
// this test binary re-executed as the helper "daemon" (TestMain).
type daemonProcess struct {
	cmd    *exec.Cmd
	stderr *testenv.Buffer // the daemon's log
	exited chan struct{}   // closed once it has exited; then err is its Wait error
	err    error
}

// startDaemonProcess starts the daemon process on the ubus socket sock and the
// machine below root, logging to its stderr. The test's cleanup stops it
// (SIGTERM, then SIGKILL after 5 s) if it still runs.
func startDaemonProcess(t *testing.T, sock, root string) *daemonProcess {
	t.Helper()
	args := []string{"daemon", "--log", "stderr", "--socket", sock, "--root", root}
	cmd, err := testenv.HelperCommand("daemon", "PS_DAEMON_ARGS="+strings.Join(args, "\x1f"))
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonProcess{cmd: cmd, stderr: &testenv.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}
