package demo

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// MenuEntry is one node of a LuCI menu.d file
// (/usr/share/luci/menu.d/*.json) whose action is a JavaScript view.
type MenuEntry struct {
	// Path is the node's path below the LuCI script URL, e.g.
	// "admin/network/packet_steering".
	Path  string
	Title string
	Order int
	// View is the view to load, e.g. "packet-steering/overview", i.e.
	// htdocs/luci-static/resources/view/<View>.js.
	View string
	// ACL lists the acl.d groups the session must hold to see the node.
	ACL []string
}

type menuFileEntry struct {
	Title  string `json:"title"`
	Order  int    `json:"order"`
	Action struct {
		Type string `json:"type"`
		Path string `json:"path"`
	} `json:"action"`
	Depends struct {
		ACL []string `json:"acl"`
	} `json:"depends"`
}

// ParseMenu reads a menu.d JSON file and returns its view entries ordered by
// path. Entries of other action types (firstchild, alias, template...) are
// left out: the stand-in only renders views.
func ParseMenu(data []byte) ([]MenuEntry, error) {
	var raw map[string]menuFileEntry
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("menu.d: %w", err)
	}
	var out []MenuEntry
	for p, e := range raw {
		if e.Action.Type != "view" {
			continue
		}
		if e.Action.Path == "" || strings.Contains(e.Action.Path, "..") || strings.HasPrefix(e.Action.Path, "/") {
			return nil, fmt.Errorf("menu.d: %s: bad view path %q", p, e.Action.Path)
		}
		if p == "" || strings.Contains(p, "..") || strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("menu.d: bad node path %q", p)
		}
		out = append(out, MenuEntry{Path: p, Title: e.Title, Order: e.Order, View: e.Action.Path, ACL: e.Depends.ACL})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
