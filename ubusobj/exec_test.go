package ubusobj

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/steering"
)

// rpcdSignature parses `list` output as rpcd's rpc_plugin_parse_exec and
// rpc_plugin_parse_signature (openwrt/rpcd plugin.c) do: one JSON object;
// each member whose value is an object is a method; each argument's type
// is its example's JSON type, an integer 8, 16 or 64 selecting int8, int16
// or int64 and any other integer int32. Nil when nothing would register.
func rpcdSignature(t *testing.T, out []byte) []ubus.MethodSig {
	t.Helper()
	top, err := ubus.AttrsFromJSON(bytes.TrimSpace(out))
	if err != nil {
		return nil
	}
	var sig []ubus.MethodSig
	for _, m := range top {
		if m.Type != ubus.TypeTable {
			continue
		}
		ms := ubus.MethodSig{Name: m.Name, Args: []ubus.ArgSig{}}
		for _, a := range m.Children {
			typ := a.Type
			if typ == ubus.TypeInt32 {
				switch a.Int {
				case 8:
					typ = ubus.TypeInt8
				case 16:
					typ = ubus.TypeInt16
				case 64:
					typ = ubus.TypeInt64
				}
			}
			ms.Args = append(ms.Args, ubus.ArgSig{Name: a.Name, Type: typ})
		}
		sig = append(sig, ms)
	}
	return sig
}

// rpcdReply turns a plugin's `call` output into what rpcd replies
// (rpc_plugin_call_finish_cb, openwrt/rpcd plugin.c, checked against the
// stock rpcd): a JSON object is the reply (status 0); JSON null and no
// output at all are NO_DATA; anything else (not JSON, JSON that is not an
// object) INVALID_ARGUMENT.
func rpcdReply(out []byte) (map[string]any, error) {
	s := bytes.TrimSpace(out)
	if len(s) == 0 || string(s) == "null" {
		return nil, ubus.StatusNoData
	}
	attrs, err := ubus.AttrsFromJSON(s)
	if err != nil {
		return nil, ubus.StatusInvalidArgument
	}
	return ubus.AttrsValue(attrs), nil
}

// execCall calls o as rpcd does through the exec plugin: a method that
// `list` did not register is refused by the bus (METHOD_NOT_FOUND, libubus
// answers it without running anything); otherwise `call METHOD` with the
// arguments as JSON on stdin ("{ }" for none, as blobmsg_format_json
// writes an empty table) and rpcd's reading of the output.
func execCall(t *testing.T, o *Object, method, args string) (map[string]any, error) {
	t.Helper()
	var list bytes.Buffer
	if err := ExecList(&list, true); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range rpcdSignature(t, list.Bytes()) {
		found = found || m.Name == method
	}
	if !found {
		return nil, ubus.StatusMethodNotFound
	}
	if args == "" {
		args = "{ }"
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := o.ExecCall(ctx, method, strings.NewReader(args), &out)
	reply, status := rpcdReply(out.Bytes())
	if (err == nil) != (status == nil) {
		t.Fatalf("ExecCall returned %v but its output %q gives %v", err, out.String(), status)
	}
	return reply, status
}

// `list` gives rpcd the signature the daemon registers, from the one table;
// while the daemon owns the object it gives nothing to register.
func TestExecList(t *testing.T) {
	var out bytes.Buffer
	if err := ExecList(&out, true); err != nil {
		t.Fatal(err)
	}
	got, want := rpcdSignature(t, out.Bytes()), Signature()
	if len(got) != len(want) {
		t.Fatalf("list registers %v, want %v\n%s", got, want, out.String())
	}
	for i := range want {
		if got[i].Name != want[i].Name || len(got[i].Args) != len(want[i].Args) {
			t.Fatalf("method %d: %+v, want %+v", i, got[i], want[i])
		}
		for j := range want[i].Args {
			if got[i].Args[j] != want[i].Args[j] {
				t.Errorf("%s arg %d: %+v, want %+v", want[i].Name, j, got[i].Args[j], want[i].Args[j])
			}
		}
	}
	out.Reset()
	if err := ExecList(&out, false); err != nil {
		t.Fatal(err)
	}
	if sig := rpcdSignature(t, out.Bytes()); len(sig) != 0 {
		t.Errorf("list while the daemon owns the object registers %v (%q)", sig, out.String())
	}
}

// Every argument of every method reads back, through rpcd's parsing of
// `list`, with its own type (TestExecList compares whole signatures; this
// names the argument that differs).
func TestExecExampleTypes(t *testing.T) {
	var out bytes.Buffer
	if err := ExecList(&out, true); err != nil {
		t.Fatal(err)
	}
	got := map[string]ubus.Type{}
	for _, m := range rpcdSignature(t, out.Bytes()) {
		for _, a := range m.Args {
			got[m.Name+"."+a.Name] = a.Type
		}
	}
	for _, m := range Methods() {
		for _, p := range m.Args {
			if got[m.Name+"."+p.Name] != p.Type {
				t.Errorf("%s.%s %s: rpcd reads %s", m.Name, p.Name, p.Type, got[m.Name+"."+p.Name])
			}
		}
	}
}

// What `call` writes for each kind of input, and the status rpcd makes of it.
func TestExecCallProtocol(t *testing.T) {
	tests := []struct {
		name, method, stdin string
		failWith            error
		wantOut             string // "{" = a JSON object
		want                ubus.Status
	}{
		{"rpcd's empty table", "status", "{ }", nil, "{", ubus.StatusOK},
		{"empty stdin", "status", "", nil, "{", ubus.StatusOK},
		{"LuCI's session id", "status", `{"ubus_rpc_session":"0123"}`, nil, "{", ubus.StatusOK},
		{"arguments", "get_queues", `{"device":"lan1"}`, nil, "{", ubus.StatusOK},
		{"bad JSON", "apply", `{"dry_run":`, nil, "false", ubus.StatusInvalidArgument},
		{"not an object", "apply", `[true]`, nil, "false", ubus.StatusInvalidArgument},
		{"trailing data", "apply", `{} {}`, nil, "false", ubus.StatusInvalidArgument},
		{"too large", "apply", `{"reason":"` + strings.Repeat("x", MaxExecInput) + `"}`, nil, "false", ubus.StatusInvalidArgument},
		{"refused argument", "set_mode", `{"mode":"turbo"}`, nil, "false", ubus.StatusInvalidArgument},
		{"unknown device", "apply", `{"device":"nope0"}`, nil, "false", ubus.StatusInvalidArgument},
		{"unknown method", "reboot", `{ }`, nil, "false", ubus.StatusInvalidArgument},
		{"engine failure", "status", `{ }`, errors.New("disk on fire"), "null", ubus.StatusNoData},
		{"timeout in the engine", "apply", `{ }`, context.DeadlineExceeded, "null", ubus.StatusNoData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			eng.failWith = tt.failWith
			o := New(eng, Options{Server: steering.ServerRPCD})
			var out bytes.Buffer
			err := o.ExecCall(context.Background(), tt.method, strings.NewReader(tt.stdin), &out)
			got := strings.TrimSpace(out.String())
			switch tt.wantOut {
			case "false", "null":
				if got != tt.wantOut {
					t.Errorf("output %q, want %q", got, tt.wantOut)
				}
			case "{":
				if !strings.HasPrefix(got, "{") || strings.Contains(got, "\n") {
					t.Errorf("output %q, want one JSON object on one line", got)
				}
			}
			if _, st := rpcdReply(out.Bytes()); ubus.StatusOf(st) != tt.want {
				t.Errorf("rpcd replies %v, want %v", ubus.StatusOf(st), tt.want)
			}
			if (err == nil) != (tt.want == ubus.StatusOK) {
				t.Errorf("err = %v", err)
			}
			if a, s := eng.calls(); tt.want != ubus.StatusOK && tt.failWith == nil && (a != 0 || s != 0) {
				t.Errorf("refused call reached the engine: %d applies, %d set_mode", a, s)
			}
		})
	}
}
