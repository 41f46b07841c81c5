// Package demo is the web side of `packet-steering demo`: an HTTP server on
// the loopback interface that serves the project's LuCI view together with a
// small stand-in for LuCI's JavaScript runtime, and a /ubus endpoint speaking
// uhttpd-mod-ubus's JSON-RPC, bridged to a ubus broker.
//
// The stand-in runtime (assets/) implements only the subset of LuCI's client
// API that the view uses, with the real signatures, so that the view runs
// unchanged here and in LuCI. The menu.d and acl.d files of the LuCI app are
// read and enforced (page paths, session access per method) so that they are
// exercised by the demo and its tests.
//
// This package must never listen on anything but the address it is given
// (the demo gives it 127.0.0.1), never serve files from outside its embedded
// trees, and never grant a session more than the acl.d files say.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Config configures a Server.
type Config struct {
	// Bus is the ubus side of /ubus.
	Bus Bus
	// App is the LuCI app's file tree: htdocs/luci-static/resources/...,
	// root/usr/share/luci/menu.d/*.json, root/usr/share/rpcd/acl.d/*.json.
	App fs.FS
	// SessionID is the id of the session the page of user root uses,
	// made by a session login at start (every acl.d group, write).
	// Empty: a random one.
	SessionID string
	// Hostname is shown in the page header.
	Hostname string
}

// Server serves the demo's pages and /ubus.
type Server struct {
	cfg      Config
	menu     []MenuEntry
	acl      ACL
	sessions *Sessions
	users    map[string]User
	sid      string
	page     *template.Template
	mux      *http.ServeMux
}

const (
	menuDir = "root/usr/share/luci/menu.d"
	aclDir  = "root/usr/share/rpcd/acl.d"
	// resourceURL is where LuCI serves luci-static/resources.
	resourceURL = "/luci-static/resources"
	// scriptURL is LuCI's script name; menu paths hang below it.
	scriptURL = "/cgi-bin/luci"
)

// Demo logins (session login, and the page's ?user=): root may read and
// write every acl.d group, viewer only read them; both hold rpcd's
// unauthenticated group (GroupUnauthenticated) and have the empty
// password, as a fresh OpenWrt root has.
const (
	UserRoot   = "root"
	UserViewer = "viewer"
)

// NewServer reads the app's menu.d and acl.d files, checks that they agree
// (every view exists, every ACL group a menu entry depends on is defined)
// and returns a server whose /ubus answers as uhttpd-mod-ubus with rpcd:
// the anonymous session DefaultSID holds no acl.d group (it may only call
// session login and access and luci getFeatures), root's session
// cfg.SessionID is made by a session login.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Bus == nil || cfg.App == nil {
		return nil, errors.New("demo: Bus and App are required")
	}
	s := &Server{cfg: cfg, acl: ACL{}, sessions: NewSessions()}
	if err := s.readApp(); err != nil {
		return nil, err
	}
	s.sid = cfg.SessionID
	if s.sid == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("demo: session id: %w", err)
		}
		s.sid = hex.EncodeToString(b[:])
	}
	// As the logins the real-image test uses (rpcd login sections): root
	// reads and writes every group ('*'), viewer reads LuCI's own
	// unauthenticated group and the app's, and writes none.
	write := map[string]Access{GroupUnauthenticated: AccessRead}
	read := map[string]Access{GroupUnauthenticated: AccessRead}
	for _, g := range s.acl.Groups() {
		write[g], read[g] = AccessWrite, AccessRead
	}
	s.users = map[string]User{UserRoot: {Grants: write}, UserViewer: {Grants: read}}
	s.sessions.Put(DefaultSID, Session{Grants: map[string]Access{GroupUnauthenticated: AccessRead}})
	if _, err := s.sessions.Login(s.users, UserRoot, "", s.sid); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}

	t, err := template.ParseFS(assets, "assets/page.html")
	if err != nil {
		return nil, fmt.Errorf("demo: page template: %w", err)
	}
	s.page = t

	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, fmt.Errorf("demo: assets: %w", err)
	}
	resources, err := fs.Sub(cfg.App, "htdocs/luci-static/resources")
	if err != nil {
		return nil, fmt.Errorf("demo: app resources: %w", err)
	}
	s.mux = http.NewServeMux()
	rpc := &RPCHandler{Bus: cfg.Bus, ACL: s.acl, Sessions: s.sessions, Users: s.users}
	s.mux.Handle("/ubus", rpc)
	s.mux.Handle("/ubus/", rpc)
	s.mux.Handle("/luci-static/standin/", http.StripPrefix("/luci-static/standin/", noDirs(http.FileServerFS(static))))
	s.mux.Handle(resourceURL+"/", http.StripPrefix(resourceURL+"/", noDirs(http.FileServerFS(resources))))
	s.mux.HandleFunc(scriptURL+"/", s.servePage)
	s.mux.HandleFunc("/", s.serveRoot)
	return s, nil
}

func (s *Server) readApp() error {
	for _, dir := range []string{menuDir, aclDir} {
		names, err := fs.Glob(s.cfg.App, dir+"/*.json")
		if err != nil {
			return fmt.Errorf("demo: %s: %w", dir, err)
		}
		if len(names) == 0 {
			return fmt.Errorf("demo: no JSON files in %s", dir)
		}
		for _, n := range names {
			data, err := fs.ReadFile(s.cfg.App, n)
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			if dir == menuDir {
				entries, err := ParseMenu(data)
				if err != nil {
					return fmt.Errorf("demo: %s: %w", n, err)
				}
				s.menu = append(s.menu, entries...)
				continue
			}
			acl, err := ParseACL(data)
			if err != nil {
				return fmt.Errorf("demo: %s: %w", n, err)
			}
			for k, v := range acl {
				s.acl[k] = v
			}
		}
	}
	if len(s.menu) == 0 {
		return errors.New("demo: menu.d has no view entries")
	}
	sort.SliceStable(s.menu, func(i, j int) bool { return s.menu[i].Order < s.menu[j].Order })
	for _, m := range s.menu {
		view := "htdocs/luci-static/resources/view/" + m.View + ".js"
		if _, err := fs.Stat(s.cfg.App, view); err != nil {
			return fmt.Errorf("demo: menu entry %s: view %s: %w", m.Path, m.View, err)
		}
		for _, g := range m.ACL {
			if _, ok := s.acl[g]; !ok {
				return fmt.Errorf("demo: menu entry %s depends on ACL group %q, which no acl.d file defines", m.Path, g)
			}
		}
	}
	return nil
}

// SessionID returns the session id the stand-in page uses.
func (s *Server) SessionID() string { return s.sid }

// Menu returns the view entries of the app's menu.d files.
func (s *Server) Menu() []MenuEntry { return append([]MenuEntry(nil), s.menu...) }

// PagePath returns the URL path of the first menu entry (the demo's page).
func (s *Server) PagePath() string { return scriptURL + "/" + s.menu[0].Path }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve serves on ln until ctx is cancelled, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("demo: http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-errc
	return nil
}

func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	http.Redirect(w, r, s.PagePath(), http.StatusFound)
}

// pageData is what assets/page.html is rendered with.
type pageData struct {
	Title    string
	Hostname string
	Menu     []menuLink
	Env      map[string]any
}

type menuLink struct {
	URL    string
	Title  string
	Active bool
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, scriptURL+"/")
	p = strings.TrimSuffix(path.Clean("/"+p), "/")
	p = strings.TrimPrefix(p, "/")
	if p == "" || p == "admin" {
		http.Redirect(w, r, s.PagePath(), http.StatusFound)
		return
	}
	var entry *MenuEntry
	for i := range s.menu {
		if s.menu[i].Path == p {
			entry = &s.menu[i]
		}
	}
	if entry == nil {
		http.NotFound(w, r)
		return
	}
	// The page's session, as LuCI's dispatcher makes it: a session login
	// for the user (root's is made once, at start; ?user=viewer logs the
	// read-only demo user in).
	sid := s.sid
	if u := r.URL.Query().Get("user"); u != "" && u != UserRoot {
		var err error
		if sid, err = s.sessions.Login(s.users, u, "", ""); err != nil || sid == "" {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
	}
	sess, _ := s.sessions.Get(sid)
	readonly := false
	for _, g := range entry.ACL {
		if !sess.Holds(g) {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		readonly = readonly || sess.Grants[g] < AccessWrite
	}
	data := pageData{Title: entry.Title, Hostname: s.cfg.Hostname}
	for _, m := range s.menu {
		data.Menu = append(data.Menu, menuLink{URL: scriptURL + "/" + m.Path, Title: m.Title, Active: m.Path == p})
	}
	data.Env = map[string]any{
		"sessionid": sid,
		// LuCI's nodespec of the view: its ACL dependencies are met, and
		// readonly when the session holds one of them only for reading.
		"nodespec":     map[string]any{"satisfied": true, "readonly": readonly},
		"base_url":     resourceURL,
		"resource":     resourceURL,
		"scriptname":   scriptURL,
		"ubuspath":     "/ubus/",
		"requestpath":  strings.Split(p, "/"),
		"view":         entry.View,
		"pollinterval": 5,
		"rpctimeout":   20,
	}
	var buf bytes.Buffer
	if err := s.page.Execute(&buf, data); err != nil {
		http.Error(w, "template: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// noDirs refuses directory listings.
func noDirs(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}
