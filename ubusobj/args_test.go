package ubusobj

import (
	"errors"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
)

func policyOf(t *testing.T, method string) []ArgPolicy {
	t.Helper()
	for _, m := range Methods() {
		if m.Name == method {
			return m.Args
		}
	}
	t.Fatalf("no method %q in the table", method)
	return nil
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		args    []ubus.Attr
		wantErr string // "" accepts
	}{
		{"status without args", "status", nil, ""},
		{"status with an arg", "status", []ubus.Attr{ubus.String("x", "y")}, `unknown argument "x"`},
		{"get_queues all", "get_queues", nil, ""},
		{"get_queues device", "get_queues", []ubus.Attr{ubus.String("device", "eth0")}, ""},
		{"get_queues device int", "get_queues", []ubus.Attr{ubus.Int32("device", 1)}, "is int32, want string"},
		{"get_queues empty device", "get_queues", []ubus.Attr{ubus.String("device", "")}, "empty device name"},
		{"get_queues path device", "get_queues", []ubus.Attr{ubus.String("device", "../eth0")}, "holds '/'"},
		{"get_queues dotdot", "get_queues", []ubus.Attr{ubus.String("device", "..")}, `device name ".."`},
		{"get_queues long device", "get_queues", []ubus.Attr{ubus.String("device", "abcdefghijklmnop")}, "longer than 15"},
		{"get_queues 15 bytes", "get_queues", []ubus.Attr{ubus.String("device", "abcdefghijklmno")}, ""},
		{"get_queues space", "get_queues", []ubus.Attr{ubus.String("device", "eth 0")}, "holds ' '"},
		{"get_queues colon", "get_queues", []ubus.Attr{ubus.String("device", "eth0:1")}, "holds ':'"},
		{"apply all args", "apply", []ubus.Attr{ubus.String("reason", "hotplug add"), ubus.String("device", "lan1"), ubus.Bool("dry_run", true)}, ""},
		{"apply dry_run as int32", "apply", []ubus.Attr{ubus.Int32("dry_run", 1)}, "is int32, want bool"},
		{"apply dry_run as string", "apply", []ubus.Attr{ubus.String("dry_run", "true")}, "is string, want bool"},
		{"apply misspelt dry_run", "apply", []ubus.Attr{ubus.Bool("dryrun", true)}, `unknown argument "dryrun"`},
		{"apply reason control char", "apply", []ubus.Attr{ubus.String("reason", "a\nb")}, "reason holds"},
		{"apply reason too long", "apply", []ubus.Attr{ubus.String("reason", strings.Repeat("x", MaxReasonLen+1))}, "longer than"},
		{"apply reason table", "apply", []ubus.Attr{ubus.Table("reason")}, "is table, want string"},
		{"apply twice", "apply", []ubus.Attr{ubus.String("device", "a"), ubus.String("device", "b")}, "given twice"},
		{"apply unnamed", "apply", []ubus.Attr{ubus.String("", "a")}, "unnamed argument"},
		{"set_mode minimal", "set_mode", []ubus.Attr{ubus.String("mode", "auto")}, ""},
		{"set_mode all args", "set_mode", []ubus.Attr{ubus.String("mode", "legacy"), ubus.Int32("flows", 4096), ubus.Bool("persist", false)}, ""},
		{"set_mode without mode", "set_mode", []ubus.Attr{ubus.Int32("flows", 1)}, `"mode" is required`},
		{"set_mode unknown mode", "set_mode", []ubus.Attr{ubus.String("mode", "fast")}, "unknown mode"},
		{"set_mode mode int", "set_mode", []ubus.Attr{ubus.Int32("mode", 1)}, "is int32, want string"},
		{"set_mode flows -1", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Int32("flows", -1)}, "outside 0.."},
		{"set_mode flows 1e9", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Int32("flows", 1e9)}, "outside 0.."},
		{"set_mode flows int64", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Int64("flows", 1<<40)}, "does not fit int32"},
		{"set_mode flows small int64", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Int64("flows", 256)}, ""},
		{"set_mode flows int16", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Int16("flows", 256)}, ""},
		{"set_mode flows double", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Double("flows", 1e9)}, "is double, want int32"},
		{"set_mode flows string", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.String("flows", "10")}, "is string, want int32"},
		{"set_mode flows bool", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Bool("flows", true)}, "is bool, want int32"},
		{"set_mode persist int", "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Int32("persist", 0)}, "is int32, want bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseArgs(policyOf(t, tt.method), tt.args)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if !errors.Is(err, ubus.StatusInvalidArgument) || ubus.StatusOf(err) != ubus.StatusInvalidArgument {
				t.Errorf("error %v does not map to INVALID_ARGUMENT (got %v)", err, ubus.StatusOf(err))
			}
		})
	}
}

func TestDecodeArgs(t *testing.T) {
	type testArgs struct {
		Name  string
		Count *int
		On    bool
	}
	fields := []Field{
		{ArgPolicy{Name: "name", Type: ubus.TypeString}, func(d any, a ubus.Attr) { d.(*testArgs).Name = a.Str }},
		{ArgPolicy{Name: "count", Type: ubus.TypeInt32, Check: checkFlows}, func(d any, a ubus.Attr) { n := int(a.Int); d.(*testArgs).Count = &n }},
		{ArgPolicy{Name: "on", Type: ubus.TypeBool}, func(d any, a ubus.Attr) { d.(*testArgs).On = a.Bool() }},
	}
	defaults := testArgs{Name: "default", On: true}
	tests := []struct {
		name    string
		args    []ubus.Attr
		want    testArgs
		wantErr string
	}{
		{"defaults", nil, testArgs{Name: "default", On: true}, ""},
		{"all given", []ubus.Attr{ubus.String("name", "x"), ubus.Int64("count", 300), ubus.Bool("on", false)}, testArgs{Name: "x", Count: ptr(300), On: false}, ""},
		{"count only", []ubus.Attr{ubus.Int32("count", 0)}, testArgs{Name: "default", Count: ptr(0), On: true}, ""},
		{"misspelt", []ubus.Attr{ubus.Bool("onn", false)}, testArgs{}, `unknown argument "onn"`},
		{"bad value", []ubus.Attr{ubus.Int32("count", -1)}, testArgs{}, "outside 0.."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaults
			err := decodeArgs(fields, &got, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || ubus.StatusOf(err) != ubus.StatusInvalidArgument {
					t.Fatalf("err = %v, want INVALID_ARGUMENT containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.On != tt.want.On || (got.Count == nil) != (tt.want.Count == nil) ||
				(got.Count != nil && *got.Count != *tt.want.Count) {
				t.Errorf("decoded %+v, want %+v", got, tt.want)
			}
		})
	}
	if defaults.Name != "default" || defaults.Count != nil || !defaults.On {
		t.Errorf("defaults changed to %+v", defaults)
	}
}

func ptr[T any](v T) *T { return &v }

// The signature is built from the same table that validates: every
// argument the signature names is accepted with its own type, and the
// table has exactly the methods of docs/design.md and argument types.
func TestSignatureMatchesDesign(t *testing.T) {
	want := map[string]map[string]ubus.Type{
		"status":     {"queues": ubus.TypeBool},
		"get_queues": {"device": ubus.TypeString},
		"apply":      {"reason": ubus.TypeString, "device": ubus.TypeString, "dry_run": ubus.TypeBool},
		"set_mode":   {"mode": ubus.TypeString, "flows": ubus.TypeInt32, "persist": ubus.TypeBool},
	}
	sig := Signature()
	if len(sig) != len(want) {
		t.Fatalf("%d methods, want %d", len(sig), len(want))
	}
	for _, m := range sig {
		w, ok := want[m.Name]
		if !ok {
			t.Errorf("unexpected method %q", m.Name)
			continue
		}
		if len(m.Args) != len(w) {
			t.Errorf("%s: %d args, want %d", m.Name, len(m.Args), len(w))
		}
		for _, a := range m.Args {
			if w[a.Name] != a.Type {
				t.Errorf("%s.%s: type %s, want %s", m.Name, a.Name, a.Type, w[a.Name])
			}
		}
	}
}

// FuzzParseArgs feeds arbitrary blobmsg to every method's policy: no panic,
// and whatever is accepted satisfies the policy.
func FuzzParseArgs(f *testing.F) {
	seeds := [][]ubus.Attr{
		{ubus.String("mode", "auto"), ubus.Int32("flows", 10), ubus.Bool("persist", true)},
		{ubus.String("device", "eth0"), ubus.Bool("dry_run", true), ubus.String("reason", "x")},
		{ubus.Int64("flows", -1), ubus.Table("mode", ubus.String("a", "b"))},
	}
	for _, s := range seeds {
		b, err := ubus.EncodeAttrs(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		attrs, err := ubus.DecodeAttrs(data, false)
		if err != nil {
			return
		}
		for _, m := range Methods() {
			a, err := ParseArgs(m.Args, attrs)
			if err != nil {
				if ubus.StatusOf(err) != ubus.StatusInvalidArgument {
					t.Fatalf("%s: refusal %v does not map to INVALID_ARGUMENT", m.Name, err)
				}
				continue
			}
			for _, at := range attrs {
				if policyIndex(m.Args, at.Name) < 0 && (at.Name != RPCSessionArg || at.Type != ubus.TypeString) {
					t.Fatalf("%s accepted unknown argument %q", m.Name, at.Name)
				}
			}
			get := func(name string) (ubus.Attr, bool) {
				i := policyIndex(m.Args, name)
				if i < 0 {
					return ubus.Attr{}, false
				}
				return a.vals[i], a.set[i]
			}
			if v, ok := get("flows"); ok && (v.Int < 0 || v.Int > plan.MaxFlows) {
				t.Fatalf("%s accepted flows %d", m.Name, v.Int)
			}
			if v, ok := get("device"); ok && checkDevice(v) != nil {
				t.Fatalf("%s accepted device %q", m.Name, v.Str)
			}
			if m.Name == "set_mode" {
				v, ok := get("mode")
				if _, err := plan.ParseMode(v.Str); !ok || err != nil {
					t.Fatalf("set_mode accepted mode %q", v.Str)
				}
			}
		}
	})
}
