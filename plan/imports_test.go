package plan

import (
	"go/build"
	"strings"
	"testing"
)

// Planning is pure: a snapshot in, a plan out. The package may import the
// snapshot's types (platform), the cpu set helpers, the out-of-line
// standard-library calls (internal/outline: locks, number formatting,
// errors) and the standard library's computing packages, never a package that reaches the machine
// (files, sockets, system calls) or the engine's I/O libraries. Its tests
// may read fixture roots; the rule is for the package itself.
func TestImportsArePure(t *testing.T) {
	const module = "github.com/packet-steering/packet-steering/"
	allowed := map[string]bool{
		module + "platform":         true,
		module + "internal/cpuset":  true,
		module + "internal/outline": true,
	}
	forbidden := []string{"os", "io/fs", "syscall", "net", "golang.org/x/sys", module + "internal/kfs", module + "internal/uci"}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports found: the check would pass on anything")
	}
	for _, imp := range pkg.Imports {
		for _, f := range forbidden {
			if imp == f || strings.HasPrefix(imp, f+"/") {
				t.Errorf("package plan imports %s: planning must not reach the machine (files: %v)", imp, pkg.ImportPos[imp])
			}
		}
		std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
		if !std && !allowed[imp] {
			t.Errorf("package plan imports %s: it may import only platform, internal/cpuset, internal/outline and the standard library", imp)
		}
	}
}
