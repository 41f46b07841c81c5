package demo

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
)

// Access is the level at which a session holds an ACL group, as rpcd grants
// it at login: Read gives the group's "read" lists, Write gives its "read"
// and its "write" lists.
type Access int

// Access levels.
const (
	AccessNone Access = iota
	AccessRead
	AccessWrite
)

// ACLGroup is one group of an rpcd acl.d file
// (/usr/share/rpcd/acl.d/*.json): a description and, per level, the ubus
// objects with the methods it allows. Method and object names may be
// shell-style patterns, as rpcd matches them with fnmatch.
type ACLGroup struct {
	Description string
	Read        map[string][]string // ubus object -> methods
	Write       map[string][]string
}

// ACL holds the groups of one or more acl.d files by name.
type ACL map[string]ACLGroup

type aclFileGroup struct {
	Description string `json:"description"`
	Read        struct {
		Ubus map[string][]string `json:"ubus"`
	} `json:"read"`
	Write struct {
		Ubus map[string][]string `json:"ubus"`
	} `json:"write"`
}

// ParseACL reads an acl.d JSON file. Only the "ubus" scope is kept; the
// demo serves nothing else (uci, file, cgi-io scopes are ignored).
func ParseACL(data []byte) (ACL, error) {
	var raw map[string]aclFileGroup
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("acl.d: %w", err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("acl.d: no groups")
	}
	acl := make(ACL, len(raw))
	for name, g := range raw {
		for _, m := range []map[string][]string{g.Read.Ubus, g.Write.Ubus} {
			for obj, methods := range m {
				if _, err := path.Match(obj, ""); err != nil {
					return nil, fmt.Errorf("acl.d: group %s: object pattern %q: %w", name, obj, err)
				}
				for _, fn := range methods {
					if _, err := path.Match(fn, ""); err != nil {
						return nil, fmt.Errorf("acl.d: group %s: method pattern %q: %w", name, fn, err)
					}
				}
			}
		}
		acl[name] = ACLGroup{Description: g.Description, Read: g.Read.Ubus, Write: g.Write.Ubus}
	}
	return acl, nil
}

// Groups returns the group names, sorted.
func (a ACL) Groups() []string {
	names := make([]string, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Session is one rpcd-like login session: the ACL groups it was granted and
// at which level.
type Session struct {
	Grants map[string]Access
	// User is the login that made the session ("" for the anonymous one).
	User string
}

// Allowed reports whether the session may call method on object under acl,
// the way rpcd's session "access" method answers uhttpd.
func (s Session) Allowed(acl ACL, object, method string) bool {
	for name, level := range s.Grants {
		g, ok := acl[name]
		if !ok {
			continue
		}
		if level >= AccessRead && matchUbus(g.Read, object, method) {
			return true
		}
		if level >= AccessWrite && matchUbus(g.Write, object, method) {
			return true
		}
	}
	return false
}

// Holds reports whether the session holds the group at any level (what a
// LuCI menu entry's depends.acl asks).
func (s Session) Holds(group string) bool { return s.Grants[group] >= AccessRead }

func matchUbus(m map[string][]string, object, method string) bool {
	for objPat, methods := range m {
		if ok, _ := path.Match(objPat, object); !ok {
			continue
		}
		for _, fnPat := range methods {
			if ok, _ := path.Match(fnPat, method); ok {
				return true
			}
		}
	}
	return false
}
