package tune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/steering"
)

// LockApplies takes the flocks every steering apply takes
// (steering.LockFile and the stock hotplug script's steering.StockLockFile
// in dir, <root>/var/lock on a router), so that neither the daemon, a
// one-shot apply nor the stock script changes steering while a sweep
// measures and restores. It waits up to wait for an apply in progress to
// finish; on error nothing stays locked. release drops the locks.
func LockApplies(ctx context.Context, dir string, wait time.Duration) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var held []*os.File
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Close() // closing drops the flock
		}
		held = nil
	}
	for _, name := range []string{steering.LockFile, steering.StockLockFile} {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
		if err != nil {
			release()
			return nil, fmt.Errorf("open lock: %w", err)
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil || (!errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR)) {
				break
			}
			select {
			case <-ctx.Done():
				err = fmt.Errorf("another apply or tune holds it: %w", ctx.Err())
			case <-time.After(10 * time.Millisecond):
				continue
			}
			break
		}
		if err != nil {
			f.Close()
			release()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		held = append(held, f)
	}
	return release, nil
}
