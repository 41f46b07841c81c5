package ubustest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Start runs a broker on a fresh socket in a temporary directory for the
// duration of the test and returns it with the socket path. The broker is
// closed and the socket removed when the test ends.
func Start(t testing.TB) (*Broker, string) {
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
			t.Errorf("ubustest: close: %v", fmt.Sprint(err))
		}
	})
	return b, path
}
