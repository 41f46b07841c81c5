package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// The objects rpcd serves next to the application's, as far as LuCI's page
// loading and a script logging in need them: session login and access
// (rpcd's session.c) and luci getFeatures (rpcd-mod-luci). They are
// answered by the /ubus handler itself, to the sessions that hold rpcd's
// acl.d group "unauthenticated" (GroupUnauthenticated).

// User is a demo login: its password and the acl.d groups it holds.
type User struct {
	Password string
	Grants   map[string]Access
}

// sessionTimeout is rpcd's default session timeout, in seconds.
const sessionTimeout = 300

// maxSessions bounds the session table: every page load logs in, as LuCI's
// dispatcher does; the oldest session goes first.
const maxSessions = 64

// GroupUnauthenticated is rpcd's acl.d group of what LuCI calls before
// and around every view (unauthenticated.json: session access and login;
// luci-base.json adds luci getFeatures to it). rpcd gives it to the
// anonymous session; a login holds it only when its read list names it
// (or '*'). A login that reads only the app's group is refused these calls
// and LuCI logs it out before the page draws ("Login session is expired"),
// as the real rpcd and LuCI of OpenWrt 23.05 do (docs/testing-openwrt.md,
// "The LuCI page in a browser").
const GroupUnauthenticated = "unauthenticated"

// unauthenticated is what GroupUnauthenticated grants.
var unauthenticated = map[string][]string{
	"session": {"access", "login"},
	"luci":    {"getFeatures"},
}

// rpcdObjects are the signatures of session and luci, for list.
var rpcdObjects = []Object{
	{Path: "luci", Methods: []Method{{Name: "getFeatures"}}},
	{Path: "session", Methods: []Method{
		{Name: "access", Args: []Arg{{"ubus_rpc_session", 3}, {"scope", 3}, {"object", 3}, {"function", 3}}},
		{Name: "login", Args: []Arg{{"username", 3}, {"password", 3}, {"timeout", 5}}},
	}},
}

// isRPCDObject reports whether object is answered here.
func isRPCDObject(object string) bool { _, ok := unauthenticated[object]; return ok }

// newSID returns a random 32-hex-digit session id, as rpcd makes them.
func newSID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Login creates a session for a user with the password, as rpcd's session
// login does; sid "" makes a random id. It returns the session id, or ""
// when the user or password is wrong.
func (s *Sessions) Login(users map[string]User, username, password, sid string) (string, error) {
	u, ok := users[username]
	if !ok || u.Password != password {
		return "", nil
	}
	if sid == "" {
		var err error
		if sid, err = newSID(); err != nil {
			return "", err
		}
	}
	grants := make(map[string]Access, len(u.Grants))
	for g, a := range u.Grants {
		grants[g] = a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.m[sid]; !exists {
		s.order = append(s.order, sid)
	}
	s.m[sid] = Session{Grants: grants, User: username}
	for len(s.order) > maxSessions {
		old := s.order[0]
		s.order = s.order[1:]
		if old != DefaultSID {
			delete(s.m, old)
		}
	}
	return sid, nil
}

// callRPCD answers a call of session or luci for the session sid.
func (h *RPCHandler) callRPCD(req rpcRequest, sid, object, method string, fields map[string]json.RawMessage) reply {
	sess, ok := h.Sessions.Get(sid)
	allowed := false
	for _, m := range unauthenticated[object] {
		allowed = allowed || m == method
	}
	if !ok || !allowed || !sess.Holds(GroupUnauthenticated) {
		return errorReply(req.ID, errAccess)
	}
	str := func(name string) string {
		var v string
		if raw, ok := fields[name]; ok {
			_ = json.Unmarshal(raw, &v)
		}
		return v
	}
	var result any
	switch object + "." + method {
	case "session.login":
		// rpcd: a wrong user or password is UBUS_STATUS_PERMISSION_DENIED (6).
		nsid, err := h.Sessions.Login(h.Users, str("username"), str("password"), "")
		if err != nil {
			return errorReply(req.ID, errInternal)
		}
		if nsid == "" {
			return reply{JSONRPC: "2.0", ID: idOrNull(req.ID), Result: json.RawMessage("[6]")}
		}
		ns, _ := h.Sessions.Get(nsid)
		result = map[string]any{
			"ubus_rpc_session": nsid, "timeout": sessionTimeout, "expires": sessionTimeout,
			"acls": h.aclDump(ns), "data": map[string]string{"username": str("username")},
		}
	case "session.access":
		// The caller's session (uhttpd passes its id as ubus_rpc_session).
		// With an object and a function: may it call them (scope "ubus",
		// the default); without: its ACL.
		obj, fn, scope := str("object"), str("function"), str("scope")
		if obj != "" && fn != "" {
			result = map[string]bool{"access": (scope == "" || scope == "ubus") && h.allowed(sess, obj, fn)}
		} else {
			result = h.aclDump(sess)
		}
	case "luci.getFeatures":
		result = map[string]bool{"firewall4": true, "ipv6": true, "rpcdUcode": false}
	}
	data, _ := json.Marshal(result)
	return reply{JSONRPC: "2.0", ID: idOrNull(req.ID), Result: append(append([]byte("[0,"), data...), ']')}
}

// allowed is the session's access to object.method, the rpcd objects'
// methods included when it holds GroupUnauthenticated.
func (h *RPCHandler) allowed(sess Session, object, method string) bool {
	if sess.Holds(GroupUnauthenticated) {
		for _, m := range unauthenticated[object] {
			if m == method {
				return true
			}
		}
	}
	return sess.Allowed(h.ACL, object, method)
}

// aclDump is a session's ACL as rpcd's session access (and login's "acls")
// shows it: {"access-group": {GROUP: ["read", "write"]}, "ubus": {OBJECT:
// [METHOD, ...]}}.
func (h *RPCHandler) aclDump(sess Session) map[string]any {
	groups := map[string][]string{}
	ubus := map[string][]string{}
	add := func(m map[string][]string) {
		for obj, fns := range m {
			ubus[obj] = append(ubus[obj], fns...)
		}
	}
	if sess.Holds(GroupUnauthenticated) {
		groups[GroupUnauthenticated] = []string{"read"}
		add(unauthenticated)
	}
	for name, level := range sess.Grants {
		g, ok := h.ACL[name]
		if !ok || level == AccessNone {
			continue
		}
		groups[name] = []string{"read"}
		add(g.Read)
		if level >= AccessWrite {
			groups[name] = append(groups[name], "write")
			add(g.Write)
		}
	}
	for obj := range ubus {
		sort.Strings(ubus[obj])
	}
	return map[string]any{"access-group": groups, "ubus": ubus}
}

// serveGet answers GET as uhttpd-mod-ubus does: /ubus/list lists every
// object with its signature ({"path": {"method": {"arg": "type"}}}),
// /ubus/list/PATH that object's methods, anything else 404 with no body.
// Like uhttpd, listing needs no session.
func (h *RPCHandler) serveGet(ctx context.Context, w http.ResponseWriter, urlPath string) {
	rest := strings.TrimPrefix(strings.TrimPrefix(urlPath, "/ubus"), "/")
	var pattern string
	switch {
	case rest == "list":
	case strings.HasPrefix(rest, "list/") && rest != "list/":
		pattern = strings.TrimPrefix(rest, "list/")
	default:
		w.WriteHeader(http.StatusNotFound)
		return
	}
	objs, err := h.objects(ctx, pattern)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		writeJSON(w, map[string]any{"code": 4, "message": "Ubus Protocol Error"})
		return
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, o := range objs {
		if o.Methods == nil {
			continue
		}
		if pattern != "" {
			// One object: its methods without the object's name around them.
			var one bytes.Buffer
			writeSignature(&one, o)
			inner := one.Bytes()[bytes.IndexByte(one.Bytes(), ':')+2 : one.Len()-1]
			if len(inner) > 0 {
				if !first {
					b.WriteByte(',')
				}
				b.Write(inner)
				first = false
			}
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeSignature(&b, o)
	}
	b.WriteByte('}')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
}

// objects is Bus.Lookup with rpcd's session and luci objects added, in
// path order.
func (h *RPCHandler) objects(ctx context.Context, pattern string) ([]Object, error) {
	objs, err := h.Bus.Lookup(ctx, pattern)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, o := range objs {
		have[o.Path] = true
	}
	for _, o := range rpcdObjects {
		if !have[o.Path] && matchPattern(pattern, o.Path) {
			objs = append(objs, o)
		}
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].Path < objs[j].Path })
	return objs, nil
}

// matchPattern is ubusd's lookup match: "" or "*" all, a trailing "*" a
// prefix, else the exact path.
func matchPattern(pattern, p string) bool {
	switch {
	case pattern == "" || pattern == "*":
		return true
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(p, strings.TrimSuffix(pattern, "*"))
	}
	return pattern == p
}
