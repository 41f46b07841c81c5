package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteTree writes files (a slash-separated path below root -> its
// content) below root, making the directories they need; a file whose
// content starts with "#!" is made executable. Any failure fails the test.
// It is the one helper the tests use to lay out a machine root or a
// configuration by hand (fixture presets come from fixturetest.Root).
func WriteTree(tb testing.TB, root string, files map[string]string) {
	tb.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			tb.Fatal(err)
		}
	}
}

// WriteLinks makes symbolic links (a path below root -> the link's
// target) below root, making the directories they need.
func WriteLinks(tb testing.TB, root string, links map[string]string) {
	tb.Helper()
	for rel, target := range links {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			tb.Fatal(err)
		}
	}
}
