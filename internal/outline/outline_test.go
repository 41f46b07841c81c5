package outline

import (
	"errors"
	"strconv"
	"sync"
	"testing"
)

// The wrappers do what the standard library's calls do: a Mutex and an
// RWMutex exclude (run with -race), Itoa formats as strconv.Itoa.
func TestOutline(t *testing.T) {
	var mu Mutex
	var rw RWMutex
	n, r := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				mu.Lock()
				n++
				mu.Unlock()
				rw.Lock()
				r++
				rw.Unlock()
				rw.RLock()
				_ = r
				rw.RUnlock()
			}
		}()
	}
	wg.Wait()
	if n != 8000 || r != 8000 {
		t.Errorf("counted %d and %d, want 8000", n, r)
	}
	if !mu.TryLock() {
		t.Error("TryLock of an unlocked Mutex failed")
	}
	if mu.TryLock() {
		t.Error("TryLock of a locked Mutex succeeded")
	}
	mu.Unlock()
	for _, v := range []int{0, 7, -12, 99, 100, 1 << 40, -1 << 62} {
		if got, want := Itoa(v), strconv.Itoa(v); got != want {
			t.Errorf("Itoa(%d) = %q, want %q", v, got, want)
		}
	}
}

// Errorf formats and wraps as fmt.Errorf.
func TestErrorf(t *testing.T) {
	base := errors.New("base")
	err := Errorf("read %s: %w", "x", base)
	if err.Error() != "read x: base" || !errors.Is(err, base) {
		t.Errorf("Errorf gave %v (wraps base: %v)", err, errors.Is(err, base))
	}
	if got := Errorf("plain").Error(); got != "plain" {
		t.Errorf("Errorf(plain) = %q", got)
	}
}
