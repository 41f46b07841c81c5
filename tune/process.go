package tune

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Running the load programs (iperf3, the --load command) with
// os.StartProcess rather than os/exec, which costs the router binary about
// 40 KB of xz on arm64 for these two calls.

// process is one program run to its end.
type process struct {
	// argv[0] is the program's path.
	argv []string
	env  []string // nil: this process's environment
	// group runs it in a process group of its own, so that cancelling
	// reaches whatever it started too.
	group bool
	// cancel is the signal sent when ctx is done; SIGKILL follows after
	// waitDelay, and then the output pipes are closed.
	cancel    syscall.Signal
	waitDelay time.Duration
	stdout    *bytes.Buffer
	stderr    *bytes.Buffer
}

// run starts the program and waits for it. An exit status other than 0 is
// an error ("exit status N", or the signal that ended it).
func (p *process) run(ctx context.Context) error {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	env := p.env
	if env == nil {
		env = os.Environ()
	}
	proc, err := os.StartProcess(p.argv[0], p.argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devnull, outW, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: p.group},
	})
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	var copies sync.WaitGroup
	for _, c := range []struct {
		r *os.File
		w *bytes.Buffer
	}{{outR, p.stdout}, {errR, p.stderr}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			// bytes.Buffer.ReadFrom, not io.Copy: the file's WriteTo would link
			// the splice path into the router binary.
			_, _ = c.w.ReadFrom(c.r)
		}()
	}
	done := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		p.signal(proc, p.cancel)
		select {
		case <-done:
		case <-time.After(p.waitDelay):
			p.signal(proc, syscall.SIGKILL)
		}
	}()
	state, werr := proc.Wait()
	close(done)
	<-killed
	// Output still held open by what the program started ends after
	// waitDelay.
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(p.waitDelay):
		outR.Close()
		errR.Close()
		<-copied
	}
	outR.Close()
	errR.Close()
	if werr != nil {
		return werr
	}
	if !state.Success() {
		return errors.New(state.String())
	}
	return nil
}

func (p *process) signal(proc *os.Process, sig syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-proc.Pid, sig)
		return
	}
	_ = proc.Signal(sig)
}

// lookPath finds an executable as a shell would: a name with a slash as
// it is, else in the directories of $PATH.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", outline.Errorf("%s: %w", name, err)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := outline.JoinPath(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", outline.Errorf("%s: executable file not found in $PATH", name)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}
