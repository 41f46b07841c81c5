package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeBus is a Bus with one object, recording the calls it gets.
type fakeBus struct {
	mu      sync.Mutex
	objects []Object
	calls   []string // "object method args"
	reply   func(object, method string) (int, json.RawMessage, error)
}

func (b *fakeBus) Call(ctx context.Context, object, method string, args json.RawMessage) (int, json.RawMessage, error) {
	b.mu.Lock()
	b.calls = append(b.calls, object+" "+method+" "+string(args))
	b.mu.Unlock()
	return b.reply(object, method)
}

func (b *fakeBus) Lookup(ctx context.Context, pattern string) ([]Object, error) {
	var out []Object
	for _, o := range b.objects {
		if pattern == "" || pattern == "*" || o.Path == pattern ||
			(strings.HasSuffix(pattern, "*") && strings.HasPrefix(o.Path, strings.TrimSuffix(pattern, "*"))) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (b *fakeBus) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

const testACL = `{
	"luci-app-packet-steering": {
		"description": "test",
		"read": { "ubus": { "packet_steering": [ "status", "get_queues" ] } },
		"write": { "ubus": { "packet_steering": [ "apply", "set_mode" ] } }
	}
}`

const writerSID = "0123456789abcdef0123456789abcdef"

func newTestRPC(t *testing.T) (*RPCHandler, *fakeBus) {
	t.Helper()
	acl, err := ParseACL([]byte(testACL))
	if err != nil {
		t.Fatal(err)
	}
	bus := &fakeBus{
		objects: []Object{
			{Path: "packet_steering", Methods: []Method{
				{Name: "status"},
				{Name: "get_queues", Args: []Arg{{"device", 3}}},
				{Name: "set_mode", Args: []Arg{{"mode", 3}, {"flows", 5}, {"persist", 7}}},
				{Name: "weird", Args: []Arg{{"d", 8}, {"big", 4}}},
			}},
			{Path: "session"}, // no signature
		},
		reply: func(object, method string) (int, json.RawMessage, error) {
			switch method {
			case "status":
				return 0, json.RawMessage(`{"mode":"auto","in_sync":true}`), nil
			case "set_mode":
				return 2, nil, nil
			case "apply":
				return 0, nil, nil
			case "get_queues":
				return 0, nil, context.DeadlineExceeded
			}
			return 0, nil, errors.New("connection lost")
		},
	}
	s := NewSessions()
	s.Put(DefaultSID, Session{Grants: map[string]Access{"luci-app-packet-steering": AccessRead}})
	s.Put(writerSID, Session{Grants: map[string]Access{"luci-app-packet-steering": AccessWrite}})
	return &RPCHandler{Bus: bus, ACL: acl, Sessions: s}, bus
}

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/ubus/?123", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestRPCCall(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		want     string
		wantCall string // the call the bus must see; "" = none
	}{
		{
			name:     "read method with the default session",
			body:     `{"jsonrpc":"2.0","id":1,"method":"call","params":["00000000000000000000000000000000","packet_steering","status",{}]}`,
			want:     `{"jsonrpc":"2.0","id":1,"result":[0,{"mode":"auto","in_sync":true}]}`,
			wantCall: `packet_steering status {"ubus_rpc_session":"00000000000000000000000000000000"}`,
		},
		{
			name: "write method with the default session is denied",
			body: `{"jsonrpc":"2.0","id":2,"method":"call","params":["00000000000000000000000000000000","packet_steering","set_mode",{"mode":"legacy"}]}`,
			want: `{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"Access denied"}}`,
		},
		{
			name:     "write method with a write session; ubus status without data",
			body:     `{"jsonrpc":"2.0","id":"x","method":"call","params":["` + writerSID + `","packet_steering","set_mode",{"mode":"legacy","flows":-1}]}`,
			want:     `{"jsonrpc":"2.0","id":"x","result":[2]}`,
			wantCall: `packet_steering set_mode {"mode":"legacy","flows":-1,"ubus_rpc_session":"` + writerSID + `"}`,
		},
		{
			name:     "ok without data",
			body:     `{"jsonrpc":"2.0","id":3,"method":"call","params":["` + writerSID + `","packet_steering","apply",{ }]}`,
			want:     `{"jsonrpc":"2.0","id":3,"result":[0]}`,
			wantCall: `packet_steering apply {"ubus_rpc_session":"` + writerSID + `"}`,
		},
		{
			name: "unknown session",
			body: `{"jsonrpc":"2.0","id":4,"method":"call","params":["ffffffffffffffffffffffffffffffff","packet_steering","status",{}]}`,
			want: `{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"Access denied"}}`,
		},
		{
			name: "method outside the ACL",
			body: `{"jsonrpc":"2.0","id":5,"method":"call","params":["` + writerSID + `","packet_steering","weird",{}]}`,
			want: `{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"Access denied"}}`,
		},
		{
			name: "unknown object",
			body: `{"jsonrpc":"2.0","id":6,"method":"call","params":["` + writerSID + `","nope","status",{}]}`,
			want: `{"jsonrpc":"2.0","id":6,"error":{"code":-32000,"message":"Object not found"}}`,
		},
		{
			name: "caller sets ubus_rpc_session",
			body: `{"jsonrpc":"2.0","id":7,"method":"call","params":["` + writerSID + `","packet_steering","status",{"ubus_rpc_session":"x"}]}`,
			want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid parameters"}}`,
		},
		{
			name: "args not an object",
			body: `{"jsonrpc":"2.0","id":8,"method":"call","params":["` + writerSID + `","packet_steering","status",[]]}`,
			want: `{"jsonrpc":"2.0","id":8,"error":{"code":-32700,"message":"Parse error"}}`,
		},
		{
			name: "too few params",
			body: `{"jsonrpc":"2.0","id":9,"method":"call","params":["` + writerSID + `","packet_steering"]}`,
			want: `{"jsonrpc":"2.0","id":9,"error":{"code":-32700,"message":"Parse error"}}`,
		},
		{
			name: "unknown JSON-RPC method",
			body: `{"jsonrpc":"2.0","id":10,"method":"frobnicate"}`,
			want: `{"jsonrpc":"2.0","id":10,"error":{"code":-32601,"message":"Method not found"}}`,
		},
		{
			name: "wrong jsonrpc version",
			body: `{"jsonrpc":"1.0","id":11,"method":"call"}`,
			want: `{"jsonrpc":"2.0","id":11,"error":{"code":-32700,"message":"Parse error"}}`,
		},
		{
			name: "not JSON",
			body: `hello`,
			want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		},
		{
			name:     "timeout",
			body:     `{"jsonrpc":"2.0","id":12,"method":"call","params":["` + writerSID + `","packet_steering","get_queues",{}]}`,
			want:     `{"jsonrpc":"2.0","id":12,"error":{"code":-32003,"message":"ubus request timed out"}}`,
			wantCall: `packet_steering get_queues {"ubus_rpc_session":"` + writerSID + `"}`,
		},
		{
			name:     "batch",
			body:     `[{"jsonrpc":"2.0","id":1,"method":"call","params":["` + writerSID + `","packet_steering","apply",{}]}, 7]`,
			want:     `[{"jsonrpc":"2.0","id":1,"result":[0]},{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}]`,
			wantCall: `packet_steering apply {"ubus_rpc_session":"` + writerSID + `"}`,
		},
		{
			name: "list all objects",
			body: `{"jsonrpc":"2.0","id":13,"method":"list"}`,
			// rpcd's luci object is listed too (session is on the bus).
			want: `{"jsonrpc":"2.0","id":13,"result":["luci","packet_steering","session"]}`,
		},
		{
			name: "list signatures",
			body: `{"jsonrpc":"2.0","id":14,"method":"list","params":["packet_*","session"]}`,
			want: `{"jsonrpc":"2.0","id":14,"result":{"packet_steering":{"status":{},"get_queues":{"device":"string"},"set_mode":{"mode":"string","flows":"number","persist":"boolean"},"weird":{"d":"unknown","big":"unknown"}}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, bus := newTestRPC(t)
			code, got := post(t, h, tt.body)
			if code != http.StatusOK {
				t.Fatalf("HTTP status %d, want 200 (uhttpd answers errors in the body)", code)
			}
			if got != tt.want {
				t.Errorf("reply\n got %s\nwant %s", got, tt.want)
			}
			calls := bus.Calls()
			switch {
			case tt.wantCall == "" && len(calls) != 0:
				t.Errorf("bus called %q, want no call", calls)
			case tt.wantCall != "" && (len(calls) != 1 || calls[0] != tt.wantCall):
				t.Errorf("bus calls %q, want [%q]", calls, tt.wantCall)
			}
		})
	}
}

func TestRPCTransportError(t *testing.T) {
	h, _ := newTestRPC(t)
	h.Bus.(*fakeBus).reply = func(string, string) (int, json.RawMessage, error) {
		return 0, nil, errors.New("connection lost")
	}
	_, got := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"call","params":["`+writerSID+`","packet_steering","status",{}]}`)
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestRPCHTTPMethods(t *testing.T) {
	h, _ := newTestRPC(t)
	for _, tt := range []struct {
		method string
		code   int
	}{
		{http.MethodOptions, http.StatusOK},
		{http.MethodGet, http.StatusNotFound}, // GET /ubus: uhttpd answers 404
		{http.MethodPut, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, "/ubus", nil))
		if rec.Code != tt.code {
			t.Errorf("%s: status %d, want %d", tt.method, rec.Code, tt.code)
		}
	}
}

func TestRPCTooLarge(t *testing.T) {
	h, bus := newTestRPC(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"call","params":["` + writerSID + `","packet_steering","status",{"pad":"` +
		strings.Repeat("x", maxPostSize) + `"}]}`
	_, got := post(t, h, big)
	if !strings.Contains(got, `"code":-32700`) {
		t.Errorf("oversized body: got %.200s, want a parse error", got)
	}
	if len(bus.Calls()) != 0 {
		t.Errorf("oversized body reached the bus")
	}
}

func TestAppendField(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{}`, `{"k":"v"}`},
		{` { } `, `{"k":"v"}`},
		{`{"a":1,"b":[1,2]}`, `{"a":1,"b":[1,2],"k":"v"}`},
	}
	for _, tt := range tests {
		got, err := appendField(json.RawMessage(tt.in), "k", "v")
		if err != nil || !bytes.Equal(got, []byte(tt.want)) {
			t.Errorf("appendField(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if _, err := appendField(json.RawMessage(`[]`), "k", "v"); err == nil {
		t.Error("appendField([]) succeeded, want an error")
	}
}
