package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for a *testing.T and records the first way the test
// would have ended.
type recorder struct {
	testing.TB
	ended string // "skip: msg" or "fail: msg"
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	if r.ended == "" {
		r.ended = "skip: " + fmt.Sprintf(format, args...)
	}
}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.ended == "" {
		r.ended = "fail: " + fmt.Sprintf(format, args...)
	}
}

func TestSkipf(t *testing.T) {
	tests := []struct {
		name, env, want string
	}{
		{"skip without the switch", "", "skip: needs a thing"},
		{"skip with another value", "0", "skip: needs a thing"},
		{"failure with the switch", "1", "fail: environment skip with " + RequireKernelEnv + "=1: needs a thing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(RequireKernelEnv, tt.env)
			r := &recorder{}
			Skipf(r, "needs a %s", "thing")
			if r.ended != tt.want {
				t.Errorf("ended %q, want %q", r.ended, tt.want)
			}
		})
	}
}

func TestNeedTool(t *testing.T) {
	t.Setenv(RequireKernelEnv, "1")
	r := &recorder{}
	if p := NeedTool(r, "sh"); p == "" || r.ended != "" {
		t.Errorf("NeedTool(sh) = %q, ended %q", p, r.ended)
	}
	r = &recorder{}
	NeedTool(r, "no-such-tool-packet-steering")
	if r.ended == "" || r.ended[:5] != "fail:" {
		t.Errorf("missing tool with the switch: ended %q, want a failure", r.ended)
	}
}

func TestStockUCI(t *testing.T) {
	tests := []struct {
		name, value, required string
		want                  string // how the test ends: "" (runs), "skip", "fail"
	}{
		{"unset: skipped", "", "", "skip"},
		{"unset: skipped even when kernel tests are required", "", "1", "skip"},
		{"an executable: runs", "/bin/sh", "1", ""},
		{"not an executable: fails", "/nonexistent/uci", "", "fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(StockUCIEnv, tt.value)
			t.Setenv(RequireKernelEnv, tt.required)
			r := &recorder{}
			got := StockUCI(r)
			ended := r.ended
			if i := strings.IndexByte(ended, ':'); i >= 0 {
				ended = ended[:i]
			}
			if ended != tt.want {
				t.Fatalf("ended %q, want %q", r.ended, tt.want)
			}
			if tt.want == "" && got != tt.value {
				t.Errorf("StockUCI = %q, want %q", got, tt.value)
			}
			if tt.want == "skip" && !strings.Contains(r.ended, StockUCIEnv) {
				t.Errorf("skip message %q does not name %s", r.ended, StockUCIEnv)
			}
		})
	}
}
