package platform

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/uci"
)

// Configuration, from UCI files in etc/config (read with internal/uci, the
// libuci grammar):
//
//	network        first `globals` section (the stock init script reads
//	               network.@globals[0]): packet_steering, steering_flows
//	firewall       @defaults[0]: flow_offloading, flow_offloading_hw
//	packet_steering (optional) globals: mode, flows; `config device`
//	               sections: name, rps_cpus, xps_cpus, napi_cpus, flows,
//	               list queue_rps 'rx-1=2'
//
// A file that does not parse is listed in Config.Errors (its values stay
// unset); one that cannot be read for another reason is a gap. A missing
// packet_steering file is normal (Steering nil).
const configDir = "etc/config"

func (f *reader) readConfig(g *gaps) Config {
	var c Config
	if p := f.loadUCI("network", &c, g, true); p != nil {
		if s := firstOfType(p, "globals"); s != nil {
			c.PacketSteering, c.PacketSteeringSet = s.Get("packet_steering")
			c.SteeringFlows, _ = s.Get("steering_flows")
		}
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
	p, err := uci.Load(f.Path(configDir), name)
	if err == nil {
		return p
	}
	var pe *uci.ParseError
	switch {
	case errors.As(err, &pe):
		msg := pe.Msg
		if pe.Line > 0 {
			msg = "line " + itoa(pe.Line) + ": " + pe.Msg
		}
		c.Errors = append(c.Errors, Gap{Path: rel, Error: msg})
	case errors.Is(err, fs.ErrNotExist):
		if wanted {
			g.add(rel, fs.ErrNotExist)
		}
	default:
		g.add(rel, err)
	}
	return nil
}

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
					Error: "section " + s.Name + ": queue_rps " + strconv.Quote(item) + ": want QUEUE=MASK"})
				continue
			}
			if o.QueueRPSCPUs == nil {
				o.QueueRPSCPUs = map[string]string{}
			}
			o.QueueRPSCPUs[q] = mask
		}
		sc.Devices = append(sc.Devices, o)
	}
	return sc
}
