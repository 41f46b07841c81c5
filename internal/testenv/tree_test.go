package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteTree(t *testing.T) {
	root := t.TempDir()
	WriteTree(t, root, map[string]string{"a/b/c": "x", "run.sh": "#!/bin/sh\n"})
	WriteLinks(t, root, map[string]string{"l/to-c": "../a/b/c"})
	if b, err := os.ReadFile(filepath.Join(root, "l/to-c")); err != nil || string(b) != "x" {
		t.Errorf("a/b/c through the link: %q, %v", b, err)
	}
	for name, want := range map[string]os.FileMode{"a/b/c": 0o644, "run.sh": 0o755} {
		fi, err := os.Stat(filepath.Join(root, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, fi, err, want)
		}
	}
}
