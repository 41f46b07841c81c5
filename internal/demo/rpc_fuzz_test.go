package demo

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRPCHandler feeds arbitrary bodies to /ubus: the handler must never
// panic, always answer 200 with JSON-RPC 2.0 frames, and never let a write
// method through for the read-only default session.
func FuzzRPCHandler(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"call","params":["` + writerSID + `","packet_steering","status",{}]}`,
		`{"jsonrpc":"2.0","id":1,"method":"call","params":["` + DefaultSID + `","packet_steering","set_mode",{"mode":"off"}]}`,
		`[{"jsonrpc":"2.0","id":1,"method":"list"},{"jsonrpc":"2.0","method":"list","params":["*"]}]`,
		`{"jsonrpc":"2.0","id":{"a":[1,2]},"method":"call","params":[1,2,3,4]}`,
		`[]`, `[[]]`, `{}`, `null`, `"x"`, `{"jsonrpc":"2.0","method":"call","params":"x"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		h, bus := newTestRPC(t)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ubus", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		var frames []map[string]json.RawMessage
		out := rec.Body.Bytes()
		if len(out) > 0 && out[0] == '[' {
			if err := json.Unmarshal(out, &frames); err != nil {
				t.Fatalf("batch reply %s: %v", out, err)
			}
		} else {
			var one map[string]json.RawMessage
			if err := json.Unmarshal(out, &one); err != nil {
				t.Fatalf("reply %s: %v", out, err)
			}
			frames = append(frames, one)
		}
		for _, fr := range frames {
			if string(fr["jsonrpc"]) != `"2.0"` {
				t.Fatalf("frame without jsonrpc 2.0: %s", out)
			}
			if (fr["result"] == nil) == (fr["error"] == nil) {
				t.Fatalf("frame needs exactly one of result and error: %s", out)
			}
		}
		for _, c := range bus.Calls() {
			if strings.HasPrefix(c, "packet_steering set_mode ") || strings.HasPrefix(c, "packet_steering apply ") {
				if strings.Contains(c, `"ubus_rpc_session":"`+DefaultSID+`"`) {
					t.Fatalf("write call for the default session reached the bus: %s", c)
				}
			}
		}
	})
}
