package layout

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/packet-steering/packet-steering"

// layers are the product's packages, each with its layer: a package may
// import only packages of a lower layer. Libraries are layer 0 and import
// no product package. Packages not listed (the tools: scripts/..., vmtest,
// e2e, this one) may import anything, and nothing may import them.
var layers = map[string]int{
	"internal/cpuset":                      0,
	"internal/kfs":                         0,
	"internal/uci":                         0,
	"internal/ubus":                        0,
	"internal/ubus/ubustest":               0,
	"internal/demo":                        0,
	"internal/testenv":                     0,
	"internal/table":                       0,
	"internal/outline":                     0,
	"internal/netnstest":                   0,
	"internal/genetlink":                   0,
	"internal/procmem":                     0,
	"luci-app-packet-steering":             0,
	"platform/fixture":                     0,
	"platform/fixture/fixturetest":         0,
	"platform":                             1,
	"plan":                                 2,
	"adaptive":                             3,
	"steering":                             4,
	"ubusobj":                              5,
	"tune":                                 5,
	"daemon":                               6,
	"cmd/packet-steering/internal/demorun": 7,
	"cmd/packet-steering":                  8,
}

// imports lists the module's packages (relative paths) with the module
// packages each imports, tests left out.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "out") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var mods []string
		for _, imp := range pkg.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				mods = append(mods, r)
			}
		}
		out[filepath.ToSlash(rel)] = mods
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportRules(t *testing.T) {
	pkgs := imports(t)
	for name := range layers {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("layers lists %s, which is not a package of the module", name)
		}
	}
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		from, product := layers[name]
		for _, imp := range pkgs[name] {
			to, ok := layers[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, a tool (or a package missing from layers)", name, imp)
			case product && from == 0 && to == 0:
				// Libraries may build on each other.
			case product && to >= from:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go one way, %s", name, from, imp, to,
					"platform -> plan -> adaptive -> steering -> ubusobj, tune -> daemon -> cmd; libraries import nothing of the product")
			}
		}
	}
}

// The check sees the imports at all: a package known to import another.
func TestImportsRead(t *testing.T) {
	pkgs := imports(t)
	for _, imp := range pkgs["steering"] {
		if imp == "plan" {
			return
		}
	}
	t.Fatalf("steering's imports read as %v, without plan", pkgs["steering"])
}
