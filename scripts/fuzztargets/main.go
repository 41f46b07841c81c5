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
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != "." {
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
