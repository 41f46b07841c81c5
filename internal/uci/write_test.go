package uci

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, name, text string) *Package {
	t.Helper()
	p, err := Parse(name, strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return p
}

func export(t *testing.T, p *Package) string {
	t.Helper()
	var b bytes.Buffer
	if err := p.Export(&b); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return b.String()
}

// TestExportFormat pins the bytes `uci commit` writes for the same content.
func TestExportFormat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "\n"},
		{
			"firewall normalised",
			"config defaults\n\toption syn_flood\t1\n\toption input\t\tREJECT\n\nconfig zone\n\toption name lan\n\tlist network 'lan'\n",
			"\nconfig defaults\n\toption syn_flood '1'\n\toption input 'REJECT'\n\nconfig zone\n\toption name 'lan'\n\tlist network 'lan'\n\n",
		},
		{
			"quotes escaped",
			"config t 's'\n\toption a \"it's\"\n\tlist l \"''\"\n",
			"\nconfig t 's'\n\toption a 'it'\\''s'\n\tlist l ''\\'''\\'''\n\n",
		},
		{
			"multiline value",
			"config t s\noption a 'x\ny'\n",
			"\nconfig t 's'\n\toption a 'x\ny'\n\n",
		},
		{
			"odd type quoted",
			"config 'a#b' s\n",
			"\nconfig 'a#b' 's'\n\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := export(t, mustParse(t, "x", tc.in))
			if got != tc.want {
				t.Errorf("Export =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// sameContent compares packages by what a file holds (an empty slice and a
// nil one hold the same).
func sameContent(a, b *Package) bool {
	return reflect.DeepEqual(canon(a), canon(b))
}

func canon(p *Package) []string {
	var out []string
	for _, s := range p.Sections {
		out = append(out, fmt.Sprintf("section %q %q %v", s.Name, s.Type, s.Anonymous))
		for _, o := range s.Options {
			out = append(out, fmt.Sprintf("option %q %v %q", o.Name, o.IsList, o.Values))
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, text := range []string{networkConf, firewallConf, wirelessConf,
		"config t s\noption a 'x\\y'\nlist l ''\nlist l \"a'b\\\"c\"\nconfig 'we;ird' \noption z 'q\r\n'\n"} {
		p1 := mustParse(t, "x", text)
		out1 := export(t, p1)
		p2 := mustParse(t, "x", out1)
		if !sameContent(p1, p2) {
			t.Errorf("round trip changed content:\n%q\n->\n%q", text, out1)
		}
		if out2 := export(t, p2); out2 != out1 {
			t.Errorf("second export differs:\n%q\n%q", out1, out2)
		}
	}
}

func TestMutators(t *testing.T) {
	p := mustParse(t, "network", networkConf)

	if err := p.Set("globals", "packet_steering", "2"); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("globals", "steering_flows", "128"); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("@device[0]", "mtu", "1500"); err != nil {
		t.Fatal(err)
	}
	if err := p.SetList("lan", "dns", []string{"198.18.0.1", "198.18.0.2"}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetList("@device[0]", "ports", []string{"lan1"}); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteOption("lan", "ip6assign"); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteSection("wan6"); err != nil {
		t.Fatal(err)
	}
	s, err := p.AddSection("device", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "cfg070f15" || !s.Anonymous {
		t.Errorf("anonymous section = %q anonymous=%v, want cfg070f15 (7th allocated)", s.Name, s.Anonymous)
	}
	if err := p.Set(s.Name, "name", "eth0"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddSection("interface", "guest"); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("@interface[-1]", "proto", "none"); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("wan", "proto", ""); err != nil { // empty deletes
		t.Fatal(err)
	}
	if err := p.Set("wan", "absent", ""); err != nil { // deleting absent is fine
		t.Fatal(err)
	}

	want := `
config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config globals 'globals'
	option ula_prefix 'fd12:3456:789a::/48'
	option packet_steering '2'
	option steering_flows '128'

config device
	option name 'br-lan'
	option type 'bridge'
	option mtu '1500'
	list ports 'lan1'

config interface 'lan'
	option device 'br-lan'
	option proto 'static'
	option ipaddr '192.168.1.1'
	option netmask '255.255.255.0'
	list dns '198.18.0.1'
	list dns '198.18.0.2'

config interface 'wan'
	option device 'wan'

config device
	option name 'eth0'

config interface 'guest'
	option proto 'none'

`
	if got := export(t, p); got != want {
		t.Errorf("after edits:\n%s\nwant:\n%s", got, want)
	}
}

func TestSetMovesChangedOptionToEnd(t *testing.T) {
	p := mustParse(t, "x", "config t s\noption a 1\noption b 2\n")
	if err := p.Set("s", "a", "1"); err != nil { // unchanged: stays
		t.Fatal(err)
	}
	if got := export(t, p); got != "\nconfig t 's'\n\toption a '1'\n\toption b '2'\n\n" {
		t.Errorf("unchanged set moved the option: %q", got)
	}
	if err := p.Set("s", "a", "3"); err != nil { // changed: moves, as uci set
		t.Fatal(err)
	}
	if got := export(t, p); got != "\nconfig t 's'\n\toption b '2'\n\toption a '3'\n\n" {
		t.Errorf("changed set: %q", got)
	}
}

func TestMutatorErrors(t *testing.T) {
	p := mustParse(t, "network", networkConf)
	before := export(t, p)
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"set missing section", func() error { return p.Set("nosuch", "a", "b") }, ErrNotFound},
		{"set bad option", func() error { return p.Set("lan", "a-b", "c") }, ErrInvalid},
		{"set NUL", func() error { return p.Set("lan", "a", "x\x00") }, ErrInvalid},
		{"setlist missing", func() error { return p.SetList("@device[5]", "a", []string{"b"}) }, ErrNotFound},
		{"setlist bad name", func() error { return p.SetList("lan", "", []string{"b"}) }, ErrInvalid},
		{"setlist NUL", func() error { return p.SetList("lan", "a", []string{"\x00"}) }, ErrInvalid},
		{"add existing", func() error { _, err := p.AddSection("interface", "lan"); return err }, ErrExists},
		{"add bad name", func() error { _, err := p.AddSection("interface", "a b"); return err }, ErrInvalid},
		{"add bad type", func() error { _, err := p.AddSection("", ""); return err }, ErrInvalid},
		{"add type with space", func() error { _, err := p.AddSection("a b", ""); return err }, ErrInvalid},
		{"delete missing section", func() error { return p.DeleteSection("@zone[0]") }, ErrNotFound},
		{"delete missing option", func() error { return p.DeleteOption("lan", "nosuch") }, ErrNotFound},
		{"delete option missing section", func() error { return p.DeleteOption("nosuch", "a") }, ErrNotFound},
	}
	for _, tc := range tests {
		if err := tc.do(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if after := export(t, p); after != before {
		t.Errorf("failed mutations changed the package:\n%s", after)
	}
}

func TestAddSectionAvoidsTakenName(t *testing.T) {
	// A named section holding the name the next anonymous one would get.
	p := mustParse(t, "x", "config t 'cfg020f15'\n")
	s, err := p.AddSection("device", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name == "cfg020f15" || p.Section(s.Name) != s {
		t.Errorf("generated name %q collides", s.Name)
	}
}

func TestExportRejectsInvalid(t *testing.T) {
	tests := []*Package{
		{Name: "x", Sections: []*Section{{Name: "s", Type: "a b"}}},
		{Name: "x", Sections: []*Section{{Name: "a-b", Type: "t"}}},
		{Name: "x", Sections: []*Section{{Name: "s", Type: "t", Options: []*Option{{Name: "a.b", Values: []string{"v"}}}}}},
		{Name: "x", Sections: []*Section{{Name: "s", Type: "t", Options: []*Option{{Name: "a", Values: []string{"v"}}, {Name: "a", Values: []string{"w"}}}}}},
		{Name: "x", Sections: []*Section{{Name: "s", Type: "t", Options: []*Option{{Name: "a", Values: []string{"v", "w"}}}}}},
		{Name: "x", Sections: []*Section{{Name: "s", Type: "t", Options: []*Option{{Name: "a", Values: []string{"\x00"}}}}}},
		{Name: "x", Sections: []*Section{nil}},
	}
	for i, p := range tests {
		var b bytes.Buffer
		if err := p.Export(&b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%d: Export err = %v, want ErrInvalid", i, err)
		}
		if b.Len() != 0 {
			t.Errorf("%d: Export wrote %q despite the error", i, b.String())
		}
	}
}

// FuzzParse checks that Parse never panics, and that whatever it accepts
// exports to text that parses back to the same content and exports the
// same again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{networkConf, firewallConf, wirelessConf,
		"config t s; option a b\n", "config t s\noption a 'x\ny'\\\n", "c t\nl a ''\no b \"\\\"\"\n",
		"config 'a#b' s\n", "package p\n# x\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p1, err := Parse("fuzz", bytes.NewReader(data))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		var b1 bytes.Buffer
		if err := p1.Export(&b1); err != nil {
			t.Fatalf("Export of parsed input: %v", err)
		}
		p2, err := Parse("fuzz", bytes.NewReader(b1.Bytes()))
		if err != nil {
			t.Fatalf("exported text does not parse: %v\n%q", err, b1.String())
		}
		if !sameContent(p1, p2) {
			t.Fatalf("round trip changed content:\n%q\n%q", data, b1.String())
		}
		var b2 bytes.Buffer
		if err := p2.Export(&b2); err != nil || b2.String() != b1.String() {
			t.Fatalf("second export differs (%v):\n%q\n%q", err, b1.String(), b2.String())
		}
	})
}
