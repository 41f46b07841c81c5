package testenv

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	type queue struct {
		Name string `json:"name"`
		RPS  string `json:"rps_cpus"`
	}
	long := make([]queue, 20)
	for i := range long {
		long[i] = queue{Name: "rx-" + string(rune('a'+i)), RPS: "0"}
	}
	changed := append([]queue(nil), long...)
	changed[10].RPS = "f"
	tests := []struct {
		name      string
		want, got any
		diff      []string // lines that must be in the diff ("" for none)
		absent    []string // lines that must not be
	}{
		{name: "equal", want: queue{"rx-0", "1"}, got: queue{"rx-0", "1"}},
		{name: "one field", want: queue{"rx-0", "1"}, got: queue{"rx-0", "2"},
			diff: []string{`-   "rps_cpus": "1"`, `+   "rps_cpus": "2"`, `    "name": "rx-0",`}},
		{name: "context only around the change", want: long, got: changed,
			diff:   []string{`-     "rps_cpus": "0"`, `+     "rps_cpus": "f"`, "  ..."},
			absent: []string{`"name": "rx-a"`}},
		{name: "nil against empty", want: []int(nil), got: []int{},
			diff: []string{"- null", "+ []"}},
		{name: "unexported fields", want: struct{ a int }{1}, got: struct{ a int }{2},
			diff: []string{"- struct { a int }{a:1}", "+ struct { a int }{a:2}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Diff(tt.want, tt.got)
			if tt.diff == nil {
				if d != "" {
					t.Fatalf("Diff of equal values:\n%s", d)
				}
				return
			}
			for _, l := range tt.diff {
				if !strings.Contains(d, l+"\n") {
					t.Errorf("diff lacks line %q:\n%s", l, d)
				}
			}
			for _, l := range tt.absent {
				if strings.Contains(d, l) {
					t.Errorf("diff has %q, far from the change:\n%s", l, d)
				}
			}
		})
	}
}
