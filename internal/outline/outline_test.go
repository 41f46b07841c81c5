package outline

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
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
	for _, v := range []int{0, 7, -12, 99, 100, math.MaxInt32, math.MinInt32, math.MaxInt, math.MinInt} {
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

// FormatFloat and FormatUint format as strconv's.
func TestFormat(t *testing.T) {
	for _, f := range []float64{0, -1.5, 3.14159, 1e21, math.Inf(1)} {
		if got, want := FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'g', -1, 64); got != want {
			t.Errorf("FormatFloat(%v) = %q, want %q", f, got, want)
		}
	}
	for _, n := range []uint64{0, 9, 1 << 63} {
		if got, want := FormatUint(n, 16), strconv.FormatUint(n, 16); got != want {
			t.Errorf("FormatUint(%d, 16) = %q, want %q", n, got, want)
		}
	}
}

// SortStrings orders as sort.Strings (slices.Sort) does.
func TestSortStrings(t *testing.T) {
	for _, in := range [][]string{
		nil,
		{"a"},
		{"eth1", "eth0", "wan", "br-lan", "eth0", ""},
		{"b", "a", "B", "A", "ab", "a b"},
	} {
		got := slices.Clone(in)
		want := slices.Clone(in)
		SortStrings(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("SortStrings(%q) = %q, want %q", in, got, want)
		}
	}
}

// JoinPath joins as filepath.Join does.
func TestJoinPath(t *testing.T) {
	for _, in := range [][]string{nil, {""}, {"", "sys"}, {"/", "sys", "class/net", "eth0/"}, {"root", "../x", "."}} {
		if got, want := JoinPath(in...), filepath.Join(in...); got != want {
			t.Errorf("JoinPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// Quote and JoinErrors do what strconv.Quote and errors.Join do.
func TestQuoteJoinErrors(t *testing.T) {
	for _, s := range []string{"", "eth0", "a \"b\"\n\x00\xff"} {
		if got, want := Quote(s), strconv.Quote(s); got != want {
			t.Errorf("Quote(%q) = %s, want %s", s, got, want)
		}
	}
	if err := JoinErrors(nil, nil); err != nil {
		t.Errorf("JoinErrors(nil, nil) = %v, want nil", err)
	}
	a, b := errors.New("a"), errors.New("b")
	err := JoinErrors(a, nil, b)
	if err == nil || err.Error() != "a\nb" || !errors.Is(err, a) || !errors.Is(err, b) {
		t.Errorf("JoinErrors(a, nil, b) = %v, want a and b joined", err)
	}
}
