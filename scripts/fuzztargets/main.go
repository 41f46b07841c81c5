// Command fuzztargets prints "package:FuzzName" for every fuzz target in the
// module's test files, so `make test-fuzz` runs each one for a short time.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

func main() {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && skipDir(path, d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(b, -1) {
			fmt.Printf("./%s:%s\n", filepath.Dir(path), m[1])
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzztargets:", err)
		os.Exit(1)
	}
}

// skipDir reports a directory that holds no package of this module:
// hidden ones, node_modules, testdata, the build output out/ (where
// make test unpacks Debian's Go 1.23 with its own fuzz tests) and any
// directory with a go.mod of its own (another module).
func skipDir(path, name string) bool {
	if strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || path == "out" {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}
