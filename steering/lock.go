package steering

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Lock files below the lock directory (<root>/var/lock by default).
// smp_tune.lock is the one the stock hotplug script flocks
// (`exec 512>/var/lock/smp_tune.lock; flock 512` in netifd's
// packet-steering.sh), so holding it keeps the stock script out too.
const (
	LockFile      = "packet_steering.lock"
	StockLockFile = "smp_tune.lock"
)

// lockPoll is how often a contended lock is retried.
const lockPoll = 5 * time.Millisecond

// LockApplies takes the flocks every apply takes (LockFile, then the stock
// hotplug script's StockLockFile, in dir: <root>/var/lock on a router), so
// that neither the daemon, a one-shot apply, tune nor the stock script
// changes steering while the caller holds them. It waits until ctx is done
// for a holder to let go; on error nothing stays locked. release drops the
// locks and may be called more than once.
func LockApplies(ctx context.Context, dir string) (release func(), err error) {
	l, err := acquireFileLock(ctx, dir, LockFile, StockLockFile)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}

// fileLock is a set of held flock(2) locks.
type fileLock struct {
	files []*os.File
}

// acquireFileLock takes exclusive flocks on every name below dir, in order,
// creating dir and the files as needed. It polls with LOCK_NB so that ctx can
// cancel the wait; on cancellation or error nothing stays locked.
func acquireFileLock(ctx context.Context, dir string, names ...string) (*fileLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, outline.Errorf("lock dir: %w", err)
	}
	l := &fileLock{}
	for _, n := range names {
		p := outline.JoinPath(dir, n)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
		if err != nil {
			l.release()
			return nil, outline.Errorf("open lock: %w", err)
		}
		if err := flockWait(ctx, f); err != nil {
			f.Close()
			l.release()
			if ctx.Err() != nil {
				return nil, outline.Errorf("lock %s: another apply or tune holds it: %w", p, err)
			}
			return nil, outline.Errorf("lock %s: %w", p, err)
		}
		l.files = append(l.files, f)
	}
	return l, nil
}

func flockWait(ctx context.Context, f *os.File) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		t.Reset(lockPoll)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// release drops the locks in reverse order. Closing the file drops its flock.
func (l *fileLock) release() {
	if l == nil {
		return
	}
	for i := len(l.files) - 1; i >= 0; i-- {
		l.files[i].Close()
	}
	l.files = nil
}
