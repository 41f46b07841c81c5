package ubustest

import (
	"os"
	"path/filepath"
)

// TB is the part of testing.TB that Start uses; *testing.T and *testing.B
// satisfy it. Taking this instead of testing.TB keeps the testing package
// out of programs that use the broker outside tests (the demo).
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Start runs a broker on a fresh socket in a temporary directory for the
// duration of the test and returns it with the socket path. The broker is
// closed and the socket removed when the test ends.
func Start(t TB) (*Broker, string) {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "ubustest")
	if err != nil {
		t.Fatalf("ubustest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "ubus.sock")
	b, err := Listen(path)
	if err != nil {
		t.Fatalf("ubustest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("ubustest: close: %v", err)
		}
	})
	return b, path
}
