package ubusobj

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// levelLogger records "LEVEL msg" for each record.
type levelLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *levelLogger) add(level, msg string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, level+" "+msg+" "+fmt.Sprint(args...))
}

func (l *levelLogger) Debug(msg string, args ...any) { l.add("DEBUG", msg, args) }
func (l *levelLogger) Info(msg string, args ...any)  { l.add("INFO", msg, args) }
func (l *levelLogger) Warn(msg string, args ...any)  { l.add("WARN", msg, args) }
func (l *levelLogger) Error(msg string, args ...any) { l.add("ERROR", msg, args) }

// TestLogApplyLevels: an apply that changed knobs is logged at info, one
// that found everything in place at debug (procd's interface triggers and
// hotplug run many of those); an apply with a failed write, and each failed
// write, at error (syslog err), which is how the system log's priority
// filters tell failures from routine applies.
func TestLogApplyLevels(t *testing.T) {
	write := plan.Action{Kind: plan.KindRPSCPUs, Device: "eth0", Queue: "rx-0", Value: "2"}
	for _, tc := range []struct {
		name string
		res  steering.Result
		want []string // level and message of each record, in order
	}{
		{"changed", steering.Result{Changed: []plan.Action{write}}, []string{"INFO applied"}},
		{"nothing to do", steering.Result{Unchanged: 12}, []string{"DEBUG applied"}},
		{"a failed write", steering.Result{Failed: []steering.Failure{{Action: write, Error: "read-only file system"}}},
			[]string{"ERROR applied", "ERROR write failed"}},
		{"changed and failed", steering.Result{Changed: []plan.Action{write},
			Failed: []steering.Failure{{Action: write, Error: "x"}, {Action: write, Error: "y"}}},
			[]string{"ERROR applied", "ERROR write failed", "ERROR write failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg := &levelLogger{}
			o := New(newFakeEngine(), Options{Logger: lg})
			res := tc.res
			o.logApply("test", &res)
			if len(lg.lines) != len(tc.want) {
				t.Fatalf("records %q, want %q", lg.lines, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lg.lines[i], w+" ") {
					t.Errorf("record %d: %q, want %q...", i, lg.lines[i], w)
				}
			}
		})
	}
}
