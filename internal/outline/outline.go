// Package outline holds standard-library calls kept out of line, and the
// other small aids that keep the router binary within its size budget.
//
// The compiler inlines sync.Mutex's Lock and Unlock, strconv.Itoa,
// strconv.Quote, fmt.Errorf, errors.Join and filepath.Join at every call
// site; on the router build, where flash is the budget (make size), one
// shared copy costs less than a few hundred inlined ones, and none of these
// calls sits on a path where the call itself matters (the locks guard calls
// that read or write files). Nothing here changes what
// the standard library does. NoCompare serves the same budget: it keeps the
// compiler from writing equality functions that nothing calls.
package outline

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// Mutex is a sync.Mutex whose Lock and Unlock are calls, not inlined
// code. The zero Mutex is unlocked; a Mutex must not be copied after first
// use.
type Mutex struct{ mu sync.Mutex }

// Lock locks m (sync.Mutex.Lock).
//
//go:noinline
func (m *Mutex) Lock() { m.mu.Lock() }

// Unlock unlocks m (sync.Mutex.Unlock).
//
//go:noinline
func (m *Mutex) Unlock() { m.mu.Unlock() }

// TryLock tries to lock m (sync.Mutex.TryLock).
//
//go:noinline
func (m *Mutex) TryLock() bool { return m.mu.TryLock() }

// RWMutex is a sync.RWMutex kept out of line like Mutex.
type RWMutex struct{ mu sync.RWMutex }

// Lock locks rw for writing (sync.RWMutex.Lock).
//
//go:noinline
func (rw *RWMutex) Lock() { rw.mu.Lock() }

// Unlock unlocks rw for writing (sync.RWMutex.Unlock).
//
//go:noinline
func (rw *RWMutex) Unlock() { rw.mu.Unlock() }

// RLock locks rw for reading (sync.RWMutex.RLock).
//
//go:noinline
func (rw *RWMutex) RLock() { rw.mu.RLock() }

// RUnlock undoes one RLock (sync.RWMutex.RUnlock).
//
//go:noinline
func (rw *RWMutex) RUnlock() { rw.mu.RUnlock() }

// Itoa is strconv.Itoa.
//
//go:noinline
func Itoa(n int) string { return strconv.Itoa(n) }

// Errorf is fmt.Errorf. fmt.Errorf is inlined (its errors.New fast path
// for a format without verbs) at every call site.
//
//go:noinline
func Errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// FormatFloat is strconv.FormatFloat.
//
//go:noinline
func FormatFloat(f float64, format byte, prec, bitSize int) string {
	return strconv.FormatFloat(f, format, prec, bitSize)
}

// FormatUint is strconv.FormatUint.
//
//go:noinline
func FormatUint(n uint64, base int) string { return strconv.FormatUint(n, base) }

// SortStrings sorts x in increasing order, as sort.Strings does. Since Go
// 1.22 sort.Strings is slices.Sort, whose generic instantiation for strings
// is about 9 KB of code that nothing else needs; sort.Slice's
// implementation is in the binary anyway (non-generic, shared by every
// sort.Slice and sort.SliceStable caller), so this costs one small
// comparison function. Kept out of line: inlined, every caller would build
// its own closure and sort.Slice call.
//
//go:noinline
func SortStrings(x []string) {
	sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
}

// NoCompare, as a struct's first field (it takes no room), makes the struct
// not comparable with ==. For a comparable struct the compiler writes an
// equality function, referenced from the type's runtime descriptor and so
// linked whenever the type is allocated, put in a slice or an interface,
// whether or not anything compares it; on the soft-float router build one
// for a struct of strings and float64s is a few hundred bytes to over a
// kilobyte. Structs that are never compared carry it; the compiler refuses
// an == on one, so nothing can come to rely on it unnoticed.
type NoCompare [0]func()

// JoinPath is filepath.Join (inlined, it is a loop and two calls at each of
// the project's few dozen call sites).
//
//go:noinline
func JoinPath(elem ...string) string { return filepath.Join(elem...) }

// Quote is strconv.Quote.
//
//go:noinline
func Quote(s string) string { return strconv.Quote(s) }

// JoinErrors is errors.Join.
//
//go:noinline
func JoinErrors(errs ...error) error { return errors.Join(errs...) }
