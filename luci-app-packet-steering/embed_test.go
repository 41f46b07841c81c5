package luciapp_test

import (
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/demo"
	luciapp "github.com/packet-steering/packet-steering/luci-app-packet-steering"
)

const viewPath = "htdocs/luci-static/resources/view/packet-steering/overview.js"

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(luciapp.Files(), name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// declared returns the object.method pairs of the view's rpc.declare calls.
func declared(t *testing.T, src string) []string {
	t.Helper()
	re := regexp.MustCompile(`rpc\.declare\(\{\s*object:\s*'([^']+)',\s*method:\s*'([^']+)'`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		out = append(out, m[1]+"."+m[2])
	}
	sort.Strings(out)
	return out
}

func TestViewDeclaresTheFourMethods(t *testing.T) {
	got := declared(t, readFile(t, viewPath))
	want := []string{"packet_steering.apply", "packet_steering.get_queues", "packet_steering.set_mode", "packet_steering.status"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rpc.declare: %v, want %v", got, want)
	}
}

// The view must need nothing but the classes the task allows, declared the
// way LuCI's loader reads them: string directives before any code.
func TestViewRequires(t *testing.T) {
	src := readFile(t, viewPath)
	lines := strings.Split(src, "\n")
	var head []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "'") {
			break
		}
		head = append(head, l)
	}
	want := []string{"'use strict';", "'require view';", "'require rpc';", "'require ui';", "'require poll';"}
	if strings.Join(head, " ") != strings.Join(want, " ") {
		t.Errorf("view header %q, want %q", head, want)
	}
	// A read-only session must not be offered the page's own controls.
	if !strings.Contains(src, "L.hasViewPermission()") {
		t.Error("view does not ask L.hasViewPermission()")
	}
	if !strings.Contains(src, "return view.extend({") {
		t.Error("view does not return view.extend({...})")
	}
	// APIs a LuCI view must not assume from the stand-in: anything on L that
	// the stand-in does not mirror, and browser-only shortcuts around LuCI.
	for _, bad := range []string{"L.dom", "L.ui", "L.Poll", "fetch(", "XMLHttpRequest", "innerHTML"} {
		if strings.Contains(src, bad) {
			t.Errorf("view uses %q", bad)
		}
	}
}

func TestACLCoversTheView(t *testing.T) {
	acl, err := demo.ParseACL([]byte(readFile(t, "root/usr/share/rpcd/acl.d/luci-app-packet-steering.json")))
	if err != nil {
		t.Fatal(err)
	}
	read := demo.Session{Grants: map[string]demo.Access{"luci-app-packet-steering": demo.AccessRead}}
	write := demo.Session{Grants: map[string]demo.Access{"luci-app-packet-steering": demo.AccessWrite}}
	tests := []struct {
		method      string
		read, write bool
	}{
		{"status", true, true},
		{"get_queues", true, true},
		{"apply", false, true},
		{"set_mode", false, true},
		{"tune", false, false},
	}
	for _, tt := range tests {
		if got := read.Allowed(acl, "packet_steering", tt.method); got != tt.read {
			t.Errorf("read access to %s = %v, want %v", tt.method, got, tt.read)
		}
		if got := write.Allowed(acl, "packet_steering", tt.method); got != tt.write {
			t.Errorf("write access to %s = %v, want %v", tt.method, got, tt.write)
		}
	}
}

func TestMenuEntry(t *testing.T) {
	entries, err := demo.ParseMenu([]byte(readFile(t, "root/usr/share/luci/menu.d/luci-app-packet-steering.json")))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("menu entries %+v, want one view", entries)
	}
	e := entries[0]
	if e.Path != "admin/network/packet_steering" || e.View != "packet-steering/overview" ||
		len(e.ACL) != 1 || e.ACL[0] != "luci-app-packet-steering" {
		t.Errorf("menu entry %+v", e)
	}
	if _, err := fs.Stat(luciapp.Files(), "htdocs/luci-static/resources/view/"+e.View+".js"); err != nil {
		t.Errorf("menu view: %v", err)
	}
}
