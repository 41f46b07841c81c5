package platform

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/uci"
	"golang.org/x/sys/unix"
)

// Configuration, from UCI files in etc/config (read with internal/uci, the
// libuci grammar):
//
//	network        first `globals` section (the stock init script reads
//	               network.@globals[0]): packet_steering, steering_flows
//	firewall       @defaults[0]: flow_offloading, flow_offloading_hw
//	packet_steering (optional) globals: mode, flows, daemon; `config device`
//	               sections: name, rps_cpus, xps_cpus, napi_cpus, flows,
//	               list queue_rps 'rx-1=2'; the first `config adaptive`
//	               section: every option, raw (adaptive.ResolveConfig)
//
// A file that is refused (it does not parse, is beyond uci.MaxFileSize or
// uci.MaxSections, is not a regular file or cannot be read) is listed in
// Config.Errors with the reason (its values stay unset; the engine keeps the
// last good config). A missing network or firewall file is a gap; a missing
// packet_steering file is normal (Steering nil).
const configDir = "etc/config"

func (f *reader) readConfig(g *gaps) Config {
	var c Config
	if p := f.loadUCI("network", &c, g, true); p != nil {
		if s := firstOfType(p, "globals"); s != nil {
			c.PacketSteering, c.PacketSteeringSet = s.Get("packet_steering")
			c.SteeringFlows, _ = s.Get("steering_flows")
		}
		c.PPPoE = pppoeLinks(p)
	}
	if p := f.loadUCI("firewall", &c, g, true); p != nil {
		if s := p.Section("@defaults[0]"); s != nil {
			c.FlowOffloading, _ = s.Get("flow_offloading")
			c.FlowOffloadingHW, _ = s.Get("flow_offloading_hw")
		}
	}
	if p := f.loadUCI("packet_steering", &c, g, false); p != nil {
		c.Steering = steeringConfig(p, &c)
	}
	return c
}

// loadUCI loads etc/config/name; nil when absent or broken (recorded).
func (f *reader) loadUCI(name string, c *Config, g *gaps, wanted bool) *uci.Package {
	rel := configDir + "/" + name
	p, err := f.parseUCI(rel, name)
	if err == nil {
		return p
	}
	var pe *uci.ParseError
	var le *uci.LimitError
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pe):
		msg := pe.Msg
		if pe.Line > 0 {
			msg = "line " + itoa(pe.Line) + ": " + pe.Msg
		}
		c.Errors = append(c.Errors, Gap{Path: rel, Error: msg})
	case errors.As(err, &le):
		c.Errors = append(c.Errors, Gap{Path: rel, Error: le.Msg})
	case errors.Is(err, fs.ErrNotExist):
		if wanted {
			g.add(rel, fs.ErrNotExist)
		}
	case errors.As(err, &pathErr):
		// Unreadable (permissions, I/O error): refused like a file that
		// does not parse, so the last good settings stay in force.
		c.Errors = append(c.Errors, Gap{Path: rel, Error: "cannot " + pathErr.Op + ": " + pathErr.Err.Error()})
	default:
		c.Errors = append(c.Errors, Gap{Path: rel, Error: err.Error()})
	}
	return nil
}

// parseUCI reads the config file rel under a shared lock and parses it as
// package name, or takes the parse of the very same bytes from the
// reader's memo. The returned package is shared with other Reads and must
// not be changed.
func (f *reader) parseUCI(rel, name string) (*uci.Package, error) {
	b, err := f.readLocked(rel)
	if err != nil {
		return nil, err
	}
	path := f.Path(rel)
	if p, err, ok := f.memo.lookup(path, b); ok {
		return p, err
	}
	p, err := uci.Parse(path, bytes.NewReader(b))
	if p != nil {
		p.Name = name
	}
	f.memo.store(path, b, p, err)
	return p, err
}

// readLocked reads the file rel while holding a shared flock on it, as
// libuci's readers do, so that it never sees a writer's half-done file.
// A writer replaces the file by rename, so a lock granted on the old inode
// guards nothing: then it reopens until the locked file is the one at rel
// (as internal/uci does).
func (f *reader) readLocked(rel string) ([]byte, error) {
	for tries := 0; ; tries++ {
		if tries == maxReopen {
			return nil, &fs.PathError{Op: "lock", Path: rel, Err: errors.New("file replaced too often while waiting for the lock")}
		}
		fd, err := f.OpenFile(f.dir, rel)
		if err != nil {
			return nil, err
		}
		held, same, err := lockedIsCurrent(f.dir.Fd(), rel, fd)
		f.Count.AddOther(3) // flock, fstat, fstatat
		if err != nil || !same {
			f.CloseFd(fd)
			if err != nil {
				return nil, err
			}
			continue
		}
		// Refused before a byte is read: a directory, a FIFO, a file
		// beyond uci.MaxFileSize.
		if held.Mode&unix.S_IFMT != unix.S_IFREG {
			f.CloseFd(fd)
			return nil, &uci.LimitError{File: rel, Msg: "not a regular file"}
		}
		if held.Size > uci.MaxFileSize {
			f.CloseFd(fd)
			return nil, &uci.LimitError{File: rel, Msg: itoa(int(held.Size)) + " bytes, over the limit of " + itoa(uci.MaxFileSize) + " bytes per config file"}
		}
		b, err := f.ReadFd(fd, rel, false)
		f.CloseFd(fd)
		return b, err
	}
}

// maxReopen bounds readLocked's reopening of a file that writers keep
// replacing; each reopen means another writer finished.
const maxReopen = 1000

// lockedIsCurrent takes a shared flock on fd and reports whether fd is
// still the file at rel below dirfd, with fd's stat.
func lockedIsCurrent(dirfd int, rel string, fd int) (*unix.Stat_t, bool, error) {
	for {
		err := unix.Flock(fd, unix.LOCK_SH)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false, &fs.PathError{Op: "flock", Path: rel, Err: err}
		}
		break
	}
	var held, now unix.Stat_t
	if err := unix.Fstat(fd, &held); err != nil {
		return nil, false, &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	if err := unix.Fstatat(dirfd, rel, &now, 0); err != nil {
		if err == unix.ENOENT {
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	return &held, held.Dev == now.Dev && held.Ino == now.Ino, nil
}

//go:noinline
func firstOfType(p *uci.Package, typ string) *uci.Section {
	if s := p.SectionsOfType(typ); len(s) > 0 {
		return s[0]
	}
	return nil
}

// steeringConfig reads /etc/config/packet_steering; malformed queue_rps
// items ("rx-1=2" is the form) are left out and listed in c.Errors.
func steeringConfig(p *uci.Package, c *Config) *SteeringConfig {
	sc := &SteeringConfig{}
	if s := firstOfType(p, "globals"); s != nil {
		sc.Mode, _ = s.Get("mode")
		sc.Flows, _ = s.Get("flows")
		sc.Daemon, _ = s.Get("daemon")
	}
	if s := firstOfType(p, "adaptive"); s != nil {
		sc.Adaptive = make(map[string]string, len(s.Options))
		for _, o := range s.Options {
			// A list is not an adaptive option's form: its items joined
			// fail the value check with a clear message.
			sc.Adaptive[o.Name] = strings.Join(o.Values, " ")
		}
	}
	for _, s := range p.SectionsOfType("device") {
		var o DeviceOverride
		o.Name, _ = s.Get("name")
		o.RPSCPUs, _ = s.Get("rps_cpus")
		o.XPSCPUs, _ = s.Get("xps_cpus")
		o.NAPICPUs, _ = s.Get("napi_cpus")
		o.Flows, _ = s.Get("flows")
		for _, item := range s.List("queue_rps") {
			q, mask, ok := strings.Cut(item, "=")
			q, mask = strings.TrimSpace(q), strings.TrimSpace(mask)
			if !ok || q == "" || mask == "" {
				c.Errors = append(c.Errors, Gap{Path: configDir + "/packet_steering",
					Error: "section " + s.Name + ": queue_rps " + outline.Quote(item) + ": want QUEUE=MASK"})
				continue
			}
			if o.QueueRPSCPUs == nil {
				o.QueueRPSCPUs = map[string]string{}
			}
			o.QueueRPSCPUs[q] = mask
		}
		o.DeferHardIRQs, _ = s.Get("defer_hard_irqs")
		o.GROFlushTimeout, _ = s.Get("gro_flush_timeout")
		o.NAPIThreaded, _ = s.Get("napi_threaded")
		for li, l := range [...]string{"queue_defer_hard_irqs", "queue_gro_flush_timeout", "queue_napi_threaded"} {
			for _, item := range s.List(l) {
				q, val, ok := strings.Cut(item, "=")
				q, val = strings.TrimSpace(q), strings.TrimSpace(val)
				if !ok || q == "" || val == "" {
					c.Errors = append(c.Errors, Gap{Path: configDir + "/packet_steering",
						Error: "section " + s.Name + ": " + l + " " + outline.Quote(item) + ": want QUEUE=VALUE (rx-N or napi-ID)"})
					continue
				}
				if o.QueueNAPI == nil {
					o.QueueNAPI = map[string]NAPIOverride{}
				}
				n := o.QueueNAPI[q]
				*[...]*string{&n.DeferHardIRQs, &n.GROFlushTimeout, &n.Threaded}[li] = val
				o.QueueNAPI[q] = n
			}
		}
		sc.Devices = append(sc.Devices, o)
	}
	return sc
}

// configMemo remembers the last parse of each config file by its exact
// contents: a file is still read on every Read, but bytes equal to those
// parsed last time give the same package without parsing again. It is safe
// for concurrent use; a nil memo remembers nothing.
type configMemo struct {
	mu      outline.Mutex
	entries map[string]memoEntry // by file path
}

type memoEntry struct {
	data []byte
	pkg  *uci.Package
	err  error
}

func (m *configMemo) lookup(path string, data []byte) (*uci.Package, error, bool) {
	if m == nil {
		return nil, nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[path]
	if !ok || !bytes.Equal(e.data, data) {
		return nil, nil, false
	}
	return e.pkg, e.err, true
}

func (m *configMemo) store(path string, data []byte, p *uci.Package, err error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]memoEntry{}
	}
	m.entries[path] = memoEntry{data: bytes.Clone(data), pkg: p, err: err}
}
