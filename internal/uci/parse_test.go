package uci

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Config texts as OpenWrt writes them on first boot (config_generate,
// firewall and mac80211 defaults), with a LuCI-style edit.
const networkConf = `
config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config globals 'globals'
	option ula_prefix 'fd12:3456:789a::/48'
	option packet_steering '1'

config device
	option name 'br-lan'
	option type 'bridge'
	list ports 'lan1'
	list ports 'lan2'
	list ports 'lan3'

config interface 'lan'
	option device 'br-lan'
	option proto 'static'
	option ipaddr '192.168.1.1'
	option netmask '255.255.255.0'
	option ip6assign '60'

config interface 'wan'
	option device 'wan'
	option proto 'dhcp'

config interface 'wan6'
	option device 'wan'
	option proto 'dhcpv6'
`

const firewallConf = `
config defaults
	option syn_flood	1
	option input		REJECT
	option output		ACCEPT
	option forward		REJECT
# Uncomment this line to disable ipv6 rules
#	option disable_ipv6	1

config zone
	option name		lan
	list   network		'lan'
	option input		ACCEPT
	option output		ACCEPT
	option forward		ACCEPT

config zone
	option name		wan
	list   network		'wan'
	list   network		'wan6'
	option input		REJECT
	option output		ACCEPT
	option forward		REJECT
	option masq		1
	option mtu_fix		1

config forwarding
	option src		lan
	option dest		wan

config rule
	option name		Allow-DHCP-Renew
	option src		wan
	option proto		udp
	option dest_port	68
	option target		ACCEPT
	option family		ipv4
`

const wirelessConf = `
config wifi-device 'radio0'
	option type 'mac80211'
	option path 'platform/soc/18000000.wifi'
	option channel '1'
	option band '2g'
	option htmode 'HE20'
	option disabled '1'

config wifi-iface 'default_radio0'
	option device 'radio0'
	option network 'lan'
	option mode 'ap'
	option ssid "OpenWrt"
	option encryption 'none'
`

const dhcpConf = `
config dnsmasq
	option domainneeded '1'
	option local '/lan/'
	option domain 'lan'

config dhcp 'lan'
	option interface 'lan'
	option start '100'
	option limit '150'
	option leasetime '12h'
`

func TestParseRealConfigs(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		sections  int
		lookups   map[[2]string]string // {sectionRef, option} -> value
		names     map[string]string    // sectionRef -> expected section name
		lists     map[[2]string][]string
		anonymous []string // refs of anonymous sections
	}{
		{
			name: "network", text: networkConf, sections: 6,
			lookups: map[[2]string]string{
				{"globals", "packet_steering"}: "1",
				{"lan", "ipaddr"}:              "192.168.1.1",
				{"@interface[-1]", "proto"}:    "dhcpv6",
				{"@interface[0]", "device"}:    "lo",
				{"@device[0]", "name"}:         "br-lan",
				{"@[2]", "type"}:               "bridge",
			},
			names: map[string]string{"@device[0]": "cfg030f15", "@interface[1]": "lan", "@globals[-1]": "globals"},
			lists: map[[2]string][]string{
				{"@device[0]", "ports"}: {"lan1", "lan2", "lan3"},
				{"lan", "proto"}:        {"static"},
			},
			anonymous: []string{"@device[0]"},
		},
		{
			name: "firewall", text: firewallConf, sections: 5,
			lookups: map[[2]string]string{
				{"@defaults[0]", "syn_flood"}: "1",
				{"@defaults[0]", "input"}:     "REJECT",
				{"@zone[1]", "masq"}:          "1",
				{"@zone[-1]", "name"}:         "wan",
				{"@rule[0]", "name"}:          "Allow-DHCP-Renew",
			},
			// The names `uci show firewall` prints on a fresh router.
			names: map[string]string{"@defaults[0]": "cfg01e63d", "@zone[0]": "cfg02dc81", "@zone[1]": "cfg03dc81", "@forwarding[0]": "cfg04ad58", "@rule[0]": "cfg0592bd"},
			lists: map[[2]string][]string{
				{"@zone[1]", "network"}: {"wan", "wan6"},
			},
			anonymous: []string{"@defaults[0]", "@zone[0]", "@rule[0]"},
		},
		{
			name: "dhcp", text: dhcpConf, sections: 2,
			lookups: map[[2]string]string{
				{"@dnsmasq[0]", "local"}: "/lan/",
				{"lan", "leasetime"}:     "12h",
			},
			// As `uci show dhcp` prints it on a fresh router.
			names:     map[string]string{"@dnsmasq[0]": "cfg01411c"},
			anonymous: []string{"@dnsmasq[0]"},
		},
		{
			name: "wireless", text: wirelessConf, sections: 2,
			lookups: map[[2]string]string{
				{"radio0", "path"}:         "platform/soc/18000000.wifi",
				{"default_radio0", "ssid"}: "OpenWrt",
				{"@wifi-iface[0]", "mode"}: "ap",
			},
			names: map[string]string{"@wifi-device[0]": "radio0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.name, strings.NewReader(tc.text))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.Name != tc.name {
				t.Errorf("Name = %q, want %q", p.Name, tc.name)
			}
			if len(p.Sections) != tc.sections {
				t.Errorf("%d sections, want %d", len(p.Sections), tc.sections)
			}
			for k, want := range tc.lookups {
				if got, ok := p.Get(k[0], k[1]); !ok || got != want {
					t.Errorf("Get(%q, %q) = %q, %v; want %q", k[0], k[1], got, ok, want)
				}
			}
			for ref, want := range tc.names {
				s := p.Section(ref)
				if s == nil || s.Name != want {
					t.Errorf("Section(%q) = %+v, want name %q", ref, s, want)
				}
			}
			for k, want := range tc.lists {
				if got := p.Section(k[0]).List(k[1]); !reflect.DeepEqual(got, want) {
					t.Errorf("List(%q, %q) = %q, want %q", k[0], k[1], got, want)
				}
			}
			for _, ref := range tc.anonymous {
				if s := p.Section(ref); s == nil || !s.Anonymous {
					t.Errorf("Section(%q) not anonymous: %+v", ref, s)
				}
			}
		})
	}
}

func TestGetOnList(t *testing.T) {
	p, err := Parse("network", strings.NewReader(networkConf))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.Get("@device[0]", "ports"); ok {
		t.Errorf("Get on a list = %q, true; want false", v)
	}
	if _, ok := p.Get("nosuch", "x"); ok {
		t.Error("Get on a missing section reported true")
	}
	if _, ok := p.Get("lan", "nosuch"); ok {
		t.Error("Get on a missing option reported true")
	}
	if got := p.Section("lan").List("nosuch"); got != nil {
		t.Errorf("List of a missing option = %q", got)
	}
}

func TestSectionRefs(t *testing.T) {
	p, err := Parse("firewall", strings.NewReader(firewallConf))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref  string
		want string // section name, "" for nil
	}{
		{"@zone[0]", "cfg02dc81"},
		{"@zone[1]", "cfg03dc81"},
		{"@zone[2]", ""},
		{"@zone[-1]", "cfg03dc81"},
		{"@zone[-2]", "cfg02dc81"},
		{"@zone[-3]", ""},
		{"@[0]", "cfg01e63d"},
		{"@[-1]", "cfg0592bd"},
		{"cfg04ad58", "cfg04ad58"},
		{"@zone", ""},
		{"@zone[x]", ""},
		{"@zone[0]x", ""},
		{"@nosuch[0]", ""},
		{"@zo ne[0]", ""},
		{"", ""},
	}
	for _, tc := range tests {
		s := p.Section(tc.ref)
		got := ""
		if s != nil {
			got = s.Name
		}
		if got != tc.want {
			t.Errorf("Section(%q) = %q, want %q", tc.ref, got, tc.want)
		}
	}
	if n := len(p.SectionsOfType("zone")); n != 2 {
		t.Errorf("SectionsOfType(zone) = %d sections, want 2", n)
	}
	if n := len(p.SectionsOfType("nosuch")); n != 0 {
		t.Errorf("SectionsOfType(nosuch) = %d sections, want 0", n)
	}
}

// TestParseGrammar covers libuci's word rules one by one.
func TestParseGrammar(t *testing.T) {
	tests := []struct {
		name string
		text string
		want map[string][]string // option -> values in section "s"
		list map[string]bool     // options that are lists
	}{
		{"unquoted", "config t 's'\n\toption a b\n", map[string][]string{"a": {"b"}}, nil},
		{"single", "config t s\noption a 'b c'\n", map[string][]string{"a": {"b c"}}, nil},
		{"double", "config t s\noption a \"b c\"\n", map[string][]string{"a": {"b c"}}, nil},
		{"double escapes", "config t s\noption a \"x\\\"y\\\\z\\n\"\n", map[string][]string{"a": {`x"y\zn`}}, nil},
		{"single keeps backslash", "config t s\noption a 'x\\y'\n", map[string][]string{"a": {`x\y`}}, nil},
		{"exported quote", "config t s\noption a 'it'\\''s'\n", map[string][]string{"a": {"it's"}}, nil},
		{"concatenated pieces", "config t s\noption a ab'c d'\"e\"f\n", map[string][]string{"a": {"abc def"}}, nil},
		{"unquoted escape", "config t s\noption a x\\ y\n", map[string][]string{"a": {"x y"}}, nil},
		{"continuation", "config t s\noption a abc\\\ndef\n", map[string][]string{"a": {"abcdef"}}, nil},
		{"continuation crlf", "config t s\noption a abc\\\r\ndef\r\n", map[string][]string{"a": {"abcdef"}}, nil},
		{"multiline single", "config t s\noption a 'x\ny'\n", map[string][]string{"a": {"x\ny"}}, nil},
		{"multiline double", "config t s\noption a \"x\ny\"\n", map[string][]string{"a": {"x\ny"}}, nil},
		{"comment after value", "config t s\noption a b # c d\n", map[string][]string{"a": {"b"}}, nil},
		{"comment glued", "config t s\noption a b#c\n", map[string][]string{"a": {"b"}}, nil},
		{"hash quoted", "config t s\noption a 'b#c'\n", map[string][]string{"a": {"b#c"}}, nil},
		{"comment lines", "# head\n\n  # indented\nconfig t s\n\t# x\noption a b\n", map[string][]string{"a": {"b"}}, nil},
		{"semicolons", "config t s; option a b; list l x ; list l y\n", map[string][]string{"a": {"b"}, "l": {"x", "y"}}, map[string]bool{"l": true}},
		{"short keywords", "c t s\no a b\nl l x\n", map[string][]string{"a": {"b"}, "l": {"x"}}, map[string]bool{"l": true}},
		{"tabs and crlf", "config\tt\t's'\r\n\toption\ta\t'b'\r\n", map[string][]string{"a": {"b"}}, nil},
		{"no final newline", "config t s\noption a b", map[string][]string{"a": {"b"}}, nil},
		{"package line ignored", "package other\nconfig t s\noption a b\n", map[string][]string{"a": {"b"}}, nil},
		{"empty value deletes", "config t s\noption a b\noption a ''\noption c\n", map[string][]string{}, nil},
		{"set again moves to end", "config t s\noption a 1\noption b 2\noption a 3\n", map[string][]string{"b": {"2"}, "a": {"3"}}, nil},
		{"same value stays", "config t s\noption a 1\noption b 2\noption a 1\n", map[string][]string{"a": {"1"}, "b": {"2"}}, nil},
		{"option then list", "config t s\noption l x\nlist l y\n", map[string][]string{"l": {"x", "y"}}, map[string]bool{"l": true}},
		{"list then option", "config t s\nlist l x\noption l y\n", map[string][]string{"l": {"y"}}, nil},
		{"empty list item", "config t s\nlist l ''\n", map[string][]string{"l": {""}}, map[string]bool{"l": true}},
		{"section reopened", "config t s\noption a 1\nconfig u\nconfig t s\noption b 2\n", map[string][]string{"a": {"1"}, "b": {"2"}}, nil},
		{"empty name anonymous", "config t ''\nconfig t s\noption a b\n", map[string][]string{"a": {"b"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("test", strings.NewReader(tc.text))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			s := p.Section("s")
			if s == nil {
				t.Fatal("no section s")
			}
			got := map[string][]string{}
			var order []string
			for _, o := range s.Options {
				got[o.Name] = o.Values
				order = append(order, o.Name)
				if o.IsList != tc.list[o.Name] {
					t.Errorf("option %s IsList = %v", o.Name, o.IsList)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("options = %q, want %q", got, tc.want)
			}
			if tc.name == "set again moves to end" && !reflect.DeepEqual(order, []string{"b", "a"}) {
				t.Errorf("order = %q, want [b a]", order)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{"unknown keyword", "config t s\n\tsetting a b\n", 2, "invalid command"},
		{"option before section", "\noption a b\n", 2, "before the first section"},
		{"config without type", "config\n", 1, "insufficient arguments"},
		{"config empty type", "config ''\n", 1, "insufficient arguments"},
		{"option without name", "config t\noption\n", 2, "insufficient arguments"},
		{"bad section name", "config t 'a-b'\n", 1, "invalid character in name field"},
		{"bad option name", "config t\noption a.b c\n", 2, "invalid character in name field"},
		{"bad package name", "package 'a b'\n", 1, "invalid character in name field"},
		{"too many arguments", "config t s\noption a b c\n", 2, "too many arguments"},
		{"config too many", "config t s x\n", 1, "too many arguments"},
		{"unterminated single", "config t s\n\n option a 'b\nc\n", 3, "unterminated '"},
		{"unterminated double", "config t s\noption a \"b\n", 2, "unterminated \""},
		{"type conflict", "config t s\nconfig u s\n", 2, "different type"},
		{"semicolon leaves argument", "config t; option a b\n", 1, "too many arguments"},
		{"NUL byte", "config t s\noption a b\x00\n", 2, "NUL"},
		{"keyword glued", "configure t\n", 1, "invalid command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("test", strings.NewReader(tc.text))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if pe.File != "test" || pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("got %+v, want line %d and %q", pe, tc.line, tc.msg)
			}
			if !strings.Contains(err.Error(), "test:") {
				t.Errorf("Error() = %q lacks the file", err.Error())
			}
		})
	}
}

// TestParseLimits: a file at MaxFileSize or MaxSections parses; one beyond
// is refused with a *LimitError naming the limit.
func TestParseLimits(t *testing.T) {
	sections := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString("config rule\n\toption name 'x'\n")
		}
		return b.String()
	}
	pad := func(n int) string {
		line := "# comment line\n"
		return strings.Repeat(line, n/len(line)) + strings.Repeat("#", n%len(line))
	}
	tests := []struct {
		name     string
		input    string
		sections int    // want this many sections, when want is ""
		want     string // in the LimitError's message
	}{
		{"sections at the limit", sections(MaxSections), MaxSections, ""},
		{"one section beyond", sections(MaxSections + 1), 0, "more than 10000 sections (line 20001)"},
		{"200,000 sections", sections(200000)[:MaxFileSize], 0, "more than 10000 sections"},
		{"size at the limit", pad(MaxFileSize), 0, ""},
		{"one byte beyond", pad(MaxFileSize + 1), 0, "more than 1048576 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("big", strings.NewReader(tc.input))
			if tc.want == "" {
				if err != nil || len(p.Sections) != tc.sections {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || !strings.Contains(le.Msg, tc.want) {
				t.Fatalf("err = %v, want a LimitError with %q", err, tc.want)
			}
		})
	}
}

func BenchmarkParseFirewall(b *testing.B) {
	b.SetBytes(int64(len(firewallConf)))
	for i := 0; i < b.N; i++ {
		if _, err := Parse("firewall", strings.NewReader(firewallConf)); err != nil {
			b.Fatal(err)
		}
	}
}
