package tune

import "fmt"

// errorf is fmt.Errorf kept out of line. fmt.Errorf is inlined (its
// errors.New fast path) at every call site; out of line, this package
// costs the router binary less (make size).
//
//go:noinline
func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
