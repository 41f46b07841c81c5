package demo

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	luciapp "github.com/packet-steering/packet-steering/luci-app-packet-steering"
)

func newTestServer(t *testing.T) (*Server, *fakeBus) {
	t.Helper()
	_, bus := newTestRPC(t)
	s, err := NewServer(Config{Bus: bus, App: luciapp.Files(), SessionID: writerSID, Hostname: "demo-router"})
	if err != nil {
		t.Fatal(err)
	}
	return s, bus
}

func get(t *testing.T, h http.Handler, url string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
	return rec
}

func TestServerPages(t *testing.T) {
	s, _ := newTestServer(t)
	h := s.Handler()
	page := "/cgi-bin/luci/admin/network/packet_steering"
	if got := s.PagePath(); got != page {
		t.Fatalf("PagePath() = %q, want %q (from menu.d)", got, page)
	}
	tests := []struct {
		url      string
		code     int
		location string
		contains []string
	}{
		{url: "/", code: http.StatusFound, location: page},
		{url: "/cgi-bin/luci/", code: http.StatusFound, location: page},
		{url: page, code: http.StatusOK, contains: []string{
			`"sessionid":"` + writerSID + `"`, `"view":"packet-steering/overview"`, `"ubuspath":"/ubus/"`,
			`/luci-static/standin/luci-standin.js`, `demo-router`, `Packet Steering`,
		}},
		{url: "/cgi-bin/luci/admin/network/nothing", code: http.StatusNotFound},
		{url: "/luci-static/resources/view/packet-steering/overview.js", code: http.StatusOK, contains: []string{
			"'require rpc';", "method: 'set_mode'",
		}},
		{url: "/luci-static/standin/luci-standin.js", code: http.StatusOK, contains: []string{"This is NOT LuCI"}},
		{url: "/luci-static/standin/standin.css", code: http.StatusOK},
		{url: "/luci-static/resources/view/", code: http.StatusNotFound},
		{url: "/luci-static/standin/page.html", code: http.StatusNotFound},
		{url: "/elsewhere", code: http.StatusNotFound},
	}
	for _, tt := range tests {
		rec := get(t, h, tt.url)
		if rec.Code != tt.code {
			t.Errorf("GET %s: status %d, want %d", tt.url, rec.Code, tt.code)
			continue
		}
		if tt.location != "" && rec.Header().Get("Location") != tt.location {
			t.Errorf("GET %s: Location %q, want %q", tt.url, rec.Header().Get("Location"), tt.location)
		}
		for _, c := range tt.contains {
			if !strings.Contains(rec.Body.String(), c) {
				t.Errorf("GET %s: body lacks %q", tt.url, c)
			}
		}
	}
}

func TestServerNoEscape(t *testing.T) {
	s, _ := newTestServer(t)
	for _, u := range []string{"/luci-static/resources/../../../etc/passwd", "/luci-static/standin/../page.html", "/luci-static/resources/%2e%2e/%2e%2e/go.mod"} {
		rec := get(t, s.Handler(), u)
		if rec.Code == http.StatusOK {
			t.Errorf("GET %s: 200 with %.80q, want no file from outside the embedded trees", u, rec.Body.String())
		}
	}
}

func TestServerRPCUsesAppACL(t *testing.T) {
	s, bus := newTestServer(t)
	h := s.Handler()
	// The page's session (root's login) may write; the anonymous session
	// may neither write nor read packet_steering, as with rpcd.
	for _, tt := range []struct {
		sid, method, want string
	}{
		{writerSID, "set_mode", `"result":[2]`},
		{writerSID, "status", `"result":[0,`},
		{DefaultSID, "set_mode", `"code":-32002`},
		{DefaultSID, "status", `"code":-32002`},
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"call","params":["` + tt.sid + `","packet_steering","` + tt.method + `",{}]}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ubus", strings.NewReader(body)))
		if !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s as %s: got %s, want %s", tt.method, tt.sid, rec.Body.String(), tt.want)
		}
	}
	if n := len(bus.Calls()); n != 2 {
		t.Errorf("bus got %d calls, want 2 (the denied ones must not reach it)", n)
	}
}

func TestServerRandomSession(t *testing.T) {
	_, bus := newTestRPC(t)
	a, err := NewServer(Config{Bus: bus, App: luciapp.Files()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewServer(Config{Bus: bus, App: luciapp.Files()})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.SessionID()) != 32 || a.SessionID() == b.SessionID() || a.SessionID() == DefaultSID {
		t.Errorf("session ids %q and %q: want two different random 32-hex ids", a.SessionID(), b.SessionID())
	}
}

func TestNewServerChecksApp(t *testing.T) {
	menu := func(acl string) string {
		return `{"admin/network/x":{"title":"X","action":{"type":"view","path":"x/y"},"depends":{"acl":["` + acl + `"]}}}`
	}
	view := &fstest.MapFile{Data: []byte("'use strict';")}
	tests := []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"menu depends on an undefined ACL group", fstest.MapFS{
			"root/usr/share/luci/menu.d/m.json":        {Data: []byte(menu("other"))},
			"root/usr/share/rpcd/acl.d/a.json":         {Data: []byte(testACL)},
			"htdocs/luci-static/resources/view/x/y.js": view,
		}, `depends on ACL group "other"`},
		{"view file missing", fstest.MapFS{
			"root/usr/share/luci/menu.d/m.json": {Data: []byte(menu("luci-app-packet-steering"))},
			"root/usr/share/rpcd/acl.d/a.json":  {Data: []byte(testACL)},
		}, "view x/y"},
		{"no acl.d", fstest.MapFS{
			"root/usr/share/luci/menu.d/m.json":        {Data: []byte(menu("luci-app-packet-steering"))},
			"htdocs/luci-static/resources/view/x/y.js": view,
		}, "acl.d"},
		{"broken menu JSON", fstest.MapFS{
			"root/usr/share/luci/menu.d/m.json":        {Data: []byte(`{`)},
			"root/usr/share/rpcd/acl.d/a.json":         {Data: []byte(testACL)},
			"htdocs/luci-static/resources/view/x/y.js": view,
		}, "menu.d"},
		{"view path escapes", fstest.MapFS{
			"root/usr/share/luci/menu.d/m.json": {Data: []byte(`{"a/b":{"action":{"type":"view","path":"../y"}}}`)},
			"root/usr/share/rpcd/acl.d/a.json":  {Data: []byte(testACL)},
		}, "bad view path"},
	}
	_, bus := newTestRPC(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(Config{Bus: bus, App: tt.fs})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewServer: err %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestServeShutsDownOnCancel(t *testing.T) {
	s, _ := newTestServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Post("http://"+ln.Addr().String()+"/ubus", "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"list"}`))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		Result []string `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil || !strings.Contains(strings.Join(r.Result, ","), "packet_steering") {
		t.Errorf("list over TCP: %s (%v)", body, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("listener still accepts after Serve returned")
	}
}

func TestACL(t *testing.T) {
	acl, err := ParseACL([]byte(`{"g":{"read":{"ubus":{"obj":["get*"]}},"write":{"ubus":{"obj":["set"],"other.*":["*"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	read := Session{Grants: map[string]Access{"g": AccessRead}}
	write := Session{Grants: map[string]Access{"g": AccessWrite}}
	none := Session{Grants: map[string]Access{"missing": AccessWrite}}
	tests := []struct {
		s              Session
		object, method string
		want           bool
	}{
		{read, "obj", "get_x", true},
		{read, "obj", "set", false},
		{write, "obj", "set", true},
		{write, "obj", "get", true},
		{write, "other.a", "anything", true},
		{write, "obj2", "get", false},
		{none, "obj", "get", false},
	}
	for _, tt := range tests {
		if got := tt.s.Allowed(acl, tt.object, tt.method); got != tt.want {
			t.Errorf("%v may call %s %s = %v, want %v", tt.s.Grants, tt.object, tt.method, got, tt.want)
		}
	}
	for _, bad := range []string{`[]`, `{}`, `{"g":{"read":{"ubus":{"[":["x"]}}}}`} {
		if _, err := ParseACL([]byte(bad)); err == nil {
			t.Errorf("ParseACL(%s) succeeded, want an error", bad)
		}
	}
}
