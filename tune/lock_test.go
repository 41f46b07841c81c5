package tune

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLockApplies(t *testing.T) {
	dir := t.TempDir()
	release, err := LockApplies(context.Background(), dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A second holder (another open file description, as another process
	// would have) waits, then gives up.
	start := time.Now()
	_, err = LockApplies(context.Background(), dir, 100*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another apply or tune") {
		t.Fatalf("second lock: err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("waited %v", time.Since(start))
	}
	release()
	release2, err := LockApplies(context.Background(), dir, time.Second)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()
}
