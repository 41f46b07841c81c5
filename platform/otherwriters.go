package platform

import (
	"errors"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Other writers of the steering knobs, as OpenWrt ships them. Each is read
// from the files that install and enable it, so that the steering package
// can take it over or leave its knobs alone, and say which:
//
//	packet_steering      netifd's service (etc/init.d/packet_steering,
//	                     START=25), with the target hook it runs instead of
//	                     netifd's own rule when one is installed
//	                     (usr/libexec/platform/packet-steering.sh: bcm53xx,
//	                     bcm4908; OtherWriter.Hook)
//	smp_affinity         etc/init.d/smp_affinity (START=93, 94 on ipq60xx) of the
//	                     qualcommax/ipq807x, qualcommax/ipq60xx and
//	                     qualcommbe/ipq95xx targets; config
//	                     smp_affinity.general.enable (default 1)
//	40-net-smp-affinity  etc/hotplug.d/net/40-net-smp-affinity of
//	                     rockchip/armv8: IRQ affinity of eth0..eth2 per board
//	irqbalance           the packages feed's irqbalance (etc/init.d/irqbalance,
//	                     procd; config irqbalance.irqbalance.enabled, default
//	                     0, and `list banirq`)
//
// An init script is enabled when etc/rc.d holds its S link (what
// `/etc/init.d/NAME enabled` tests). etc/packet-steering/takeover is written
// by the package's scripts when they disable a service: one line
// "NAME enabled|disabled" per service, its state before the takeover (what
// removal restores).
const (
	rcDir        = "etc/rc.d"
	takeoverPath = "etc/packet-steering/takeover"
	// platformHook is the target hook netifd's service runs, when
	// present, instead of /usr/libexec/network/packet-steering.uc.
	platformHook = "usr/libexec/platform/packet-steering.sh"
)

// Names of the other writers (OtherWriter.Name).
const (
	WriterNetifd       = "packet_steering"
	WriterSMPAffinity  = "smp_affinity"
	WriterRockchipIRQs = "40-net-smp-affinity"
	WriterIRQBalance   = "irqbalance"
)

// OtherWriter is another program on the machine that writes steering knobs.
type OtherWriter struct {
	// Name is one of the Writer* names; Path its script below the root.
	Name string `json:"name"`
	Path string `json:"path"`
	// Enabled: an init script has its etc/rc.d S link; a hotplug script
	// is present (it runs on every event).
	Enabled bool `json:"enabled"`
	// ConfigOff: the writer's own UCI switch turns it off
	// (smp_affinity.general.enable 0, irqbalance.irqbalance.enabled 0).
	ConfigOff bool `json:"config_off,omitempty"`
	// Running: a process of it runs (irqbalance).
	Running bool `json:"running,omitempty"`
	// TakenOver: packet-steering disabled it; WasEnabled is its state
	// before, as recorded in etc/packet-steering/takeover.
	TakenOver  bool `json:"taken_over,omitempty"`
	WasEnabled bool `json:"was_enabled,omitempty"`
	// BanIRQs are irqbalance's `list banirq` IRQ numbers.
	BanIRQs []int `json:"ban_irqs,omitempty"`
	// Hook is the target hook netifd's service runs in place of its own
	// rule (packet_steering only; "" when none is installed).
	Hook string `json:"hook,omitempty"`
}

// readWriters finds the other writers below the root. processes are the
// comm names of the processes of interest (readProcesses).
func (f *reader) readWriters(g *gaps, processes []string) []OtherWriter {
	var links []string
	err := f.Names(f.dir, func(e []byte) { links = append(links, string(e)) }, rcDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		g.add(rcDir, err)
	}
	enabled := func(name string) bool {
		for _, l := range links {
			if len(l) > 3 && l[0] == 'S' && l[3:] == name {
				return true
			}
		}
		return false
	}
	taken := map[string]bool{} // name -> was enabled
	if b, err := f.File(f.dir, takeoverPath); err == nil {
		taken = parseTakeover(string(b))
	} else if !errors.Is(err, fs.ErrNotExist) {
		g.add(takeoverPath, err)
	}
	var out []OtherWriter
	initWriter := func(name string) *OtherWriter {
		rel := "etc/init.d/" + name
		if !f.Exists(f.dir, rel) {
			return nil
		}
		w := OtherWriter{Name: name, Path: rel, Enabled: enabled(name)}
		w.WasEnabled, w.TakenOver = taken[name]
		out = append(out, w)
		return &out[len(out)-1]
	}
	if w := initWriter(WriterNetifd); w != nil && f.Exists(f.dir, platformHook) {
		w.Hook = platformHook
	}
	if w := initWriter(WriterSMPAffinity); w != nil {
		if v, ok := f.uciOption(g, "smp_affinity", "general", "enable"); ok {
			w.ConfigOff = !uciTrue(v)
		}
	}
	if rel := "etc/hotplug.d/net/" + WriterRockchipIRQs; f.Exists(f.dir, rel) {
		out = append(out, OtherWriter{Name: WriterRockchipIRQs, Path: rel, Enabled: true})
	}
	running := false
	for _, p := range processes {
		running = running || p == "irqbalance"
	}
	if w := initWriter(WriterIRQBalance); w != nil || running {
		if w == nil {
			out = append(out, OtherWriter{Name: WriterIRQBalance})
			w = &out[len(out)-1]
		}
		w.Running = running
		v, ok := f.uciOption(g, "irqbalance", "irqbalance", "enabled")
		w.ConfigOff = !ok || !uciTrue(v)
		w.BanIRQs = f.banIRQs(g)
	}
	return out
}

// parseTakeover reads etc/packet-steering/takeover: "NAME enabled" or
// "NAME disabled" per line; anything else is ignored.
func parseTakeover(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		switch fields[1] {
		case "enabled":
			out[fields[0]] = true
		case "disabled":
			out[fields[0]] = false
		}
	}
	return out
}

// uciOption reads one option of a named section of etc/config/pkg; a file
// that is absent is no value, one that does not parse a gap.
func (f *reader) uciOption(g *gaps, pkg, section, option string) (string, bool) {
	p, err := f.parseUCI(configDir+"/"+pkg, pkg)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			g.add(configDir+"/"+pkg, err)
		}
		return "", false
	}
	s := p.Section(section)
	if s == nil {
		return "", false
	}
	return s.Get(option)
}

// banIRQs is irqbalance.irqbalance's `list banirq`, as numbers.
func (f *reader) banIRQs(g *gaps) []int {
	p, err := f.parseUCI(configDir+"/irqbalance", "irqbalance")
	if err != nil {
		return nil
	}
	s := p.Section("irqbalance")
	if s == nil {
		return nil
	}
	var out []int
	for _, v := range s.List("banirq") {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// uciTrue is libuci's boolean reading (config_get_bool): 1, on, true, yes,
// enabled are true.
func uciTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "on", "true", "yes", "enabled":
		return true
	}
	return false
}
