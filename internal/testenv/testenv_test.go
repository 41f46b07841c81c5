package testenv

import (
	"fmt"
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
