package tune

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The process runner: output captured, exit status and signals reported,
// the environment passed, and a cancelled run ended (its whole process
// group with group set) within waitDelay.
func TestProcessRun(t *testing.T) {
	sh, err := lookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	run := func(ctx context.Context, group bool, line string, env ...string) (string, string, error) {
		var out, errb bytes.Buffer
		p := &process{argv: []string{sh, "-c", line}, group: group, cancel: syscall.SIGKILL, waitDelay: time.Second, stdout: &out, stderr: &errb}
		if env != nil {
			p.env = append(os.Environ(), env...)
		}
		err := p.run(ctx)
		return out.String(), errb.String(), err
	}
	ctx := context.Background()
	if out, errOut, err := run(ctx, false, `echo out; echo err >&2; echo "$X"`, "X=from-env"); err != nil || out != "out\nfrom-env\n" || errOut != "err\n" {
		t.Errorf("echo: %q %q %v", out, errOut, err)
	}
	if _, _, err := run(ctx, false, "exit 3"); err == nil || err.Error() != "exit status 3" {
		t.Errorf("exit 3: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	// The child of the shell holds the pipes open; the group kill ends it.
	if _, _, err := run(cctx, true, "sleep 30 & sleep 30; wait"); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("cancelled run: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("cancelled run took %v", d)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/nonexistent:"+dir)
	if p, err := lookPath("prog"); err != nil || p != exe {
		t.Errorf("prog: %q %v", p, err)
	}
	for _, name := range []string{"plain", "missing", filepath.Join(dir, "plain")} {
		if p, err := lookPath(name); err == nil {
			t.Errorf("%s: found %q", name, p)
		}
	}
	if p, err := lookPath(exe); err != nil || p != exe {
		t.Errorf("%s: %q %v", exe, p, err)
	}
}
