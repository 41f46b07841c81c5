package luciapp_test

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
)

// potPath is the translation template: luci.mk builds po/<lang>/*.po
// next to it into the catalogues the page's _() looks strings up in.
const potPath = "po/templates/packet-steering.pot"

// viewStrings returns every _('...') string of the view, decoded as
// JavaScript decodes a single-quoted literal, and the menu entry's title
// (LuCI's i18n-scan.pl takes both).
func viewStrings(t *testing.T) []string {
	t.Helper()
	src := readFile(t, viewPath)
	seen := map[string]bool{}
	for i := 0; ; {
		j := strings.Index(src[i:], "_('")
		if j < 0 {
			break
		}
		k := i + j + 3
		var b strings.Builder
		for ; k < len(src) && src[k] != '\''; k++ {
			c := src[k]
			if c == '\\' && k+1 < len(src) {
				k++
				switch src[k] {
				case 'n':
					c = '\n'
				default:
					c = src[k]
				}
			}
			b.WriteByte(c)
		}
		seen[b.String()] = true
		i = k
	}
	var menu map[string]struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "root/usr/share/luci/menu.d/luci-app-packet-steering.json")), &menu); err != nil {
		t.Fatal(err)
	}
	for _, e := range menu {
		if e.Title != "" {
			seen[e.Title] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// poQuote writes s as a PO string literal.
func poQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// renderPOT is the template for msgids.
func renderPOT(msgids []string) string {
	var b strings.Builder
	b.WriteString("msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=UTF-8\"\n")
	for _, id := range msgids {
		b.WriteString("\nmsgid " + poQuote(id) + "\nmsgstr \"\"\n")
	}
	return b.String()
}

// TestPOTemplate: the translation template lists exactly the view's and
// the menu's strings, so the page can be translated. UPDATE_PO=1
// rewrites it.
func TestPOTemplate(t *testing.T) {
	ids := viewStrings(t)
	if len(ids) < 50 {
		t.Fatalf("only %d strings found in the view", len(ids))
	}
	want := renderPOT(ids)
	if os.Getenv("UPDATE_PO") == "1" {
		if err := os.MkdirAll("po/templates", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(potPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(potPath)
	if err != nil {
		t.Fatalf("%v (UPDATE_PO=1 go test ./luci-app-packet-steering writes it)", err)
	}
	if string(got) != want {
		t.Errorf("%s is not the view's strings; run UPDATE_PO=1 go test ./luci-app-packet-steering", potPath)
	}
}
