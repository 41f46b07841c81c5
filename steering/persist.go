package steering

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/uci"
	"github.com/packet-steering/packet-steering/plan"
)

// Config names and the network option values the stock init script reads
// (network.globals.packet_steering: 0 off, 1 on, 2 all CPUs).
const (
	configSteering = "packet_steering"
	configNetwork  = "network"
)

// networkSteeringValue is the network.globals.packet_steering value that
// tells LuCI and the stock scripts the same thing as mode.
func networkSteeringValue(m plan.Mode) string {
	switch m {
	case plan.ModeOff:
		return "0"
	case plan.ModeAll:
		return "2"
	}
	return "1"
}

// globalsSection returns the ref of the package's globals section: the one
// named 'globals', else the first of type globals, else a new named one.
func globalsSection(p *uci.Package) (string, error) {
	if s := p.Section("globals"); s != nil {
		return s.Name, nil
	}
	if s := p.Section("@globals[0]"); s != nil {
		return s.Name, nil
	}
	s, err := p.AddSection("globals", "globals")
	if err != nil {
		return "", err
	}
	return s.Name, nil
}

// persistSettings writes mode and flows to packet_steering.globals and keeps
// network.globals.packet_steering and steering_flows truthful. Each file is
// a read-modify-write under uci.Update's exclusive lock, so a file is never
// torn; when the second write fails the first is put back as it was. A file
// that cannot be read or parsed is never overwritten, and the error says
// which file and why.
func persistSettings(configDir string, m plan.Mode, flows int) error {
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return outline.Errorf("config dir: %w", err)
	}
	// Both files are checked before either is written: a file that cannot
	// be read or parsed (beyond uci.MaxFileSize or uci.MaxSections, a
	// directory, a syntax error) fails the save with nothing written.
	for _, name := range []string{configSteering, configNetwork} {
		if _, err := uci.Load(configDir, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return outline.Errorf("save %s/%s: existing file is not overwritten: %w", configDir, name, err)
		}
	}
	var old struct{ mode, flows string }
	steeringPath := outline.JoinPath(configDir, configSteering)
	_, statErr := os.Stat(steeringPath)
	existed := statErr == nil
	err := uci.Update(configDir, configSteering, func(p *uci.Package) error {
		ref, err := globalsSection(p)
		if err != nil {
			return err
		}
		old.mode, _ = p.Get(ref, "mode")
		old.flows, _ = p.Get(ref, "flows")
		if err := p.Set(ref, "mode", string(m)); err != nil {
			return err
		}
		return p.Set(ref, "flows", outline.Itoa(flows))
	})
	if err != nil {
		if !existed {
			removeIfEmpty(steeringPath)
		}
		return outline.Errorf("save %s/%s: %w", configDir, configSteering, err)
	}
	networkPath := outline.JoinPath(configDir, configNetwork)
	_, statErr = os.Stat(networkPath)
	networkExisted := statErr == nil
	err = uci.Update(configDir, configNetwork, func(p *uci.Package) error {
		ref := ""
		if s := p.Section("@globals[0]"); s != nil {
			ref = s.Name
		} else {
			s, err := p.AddSection("globals", "globals")
			if err != nil {
				return err
			}
			ref = s.Name
		}
		if err := p.Set(ref, "packet_steering", networkSteeringValue(m)); err != nil {
			return err
		}
		return p.Set(ref, "steering_flows", outline.Itoa(flows))
	})
	if err == nil {
		return nil
	}
	if !networkExisted {
		removeIfEmpty(networkPath)
	}
	err = outline.Errorf("save %s/%s: %w", configDir, configNetwork, err)
	undo := uci.Update(configDir, configSteering, func(p *uci.Package) error {
		ref, err := globalsSection(p)
		if err != nil {
			return err
		}
		// Set with "" deletes, which is what an absent option was.
		if err := p.Set(ref, "mode", old.mode); err != nil {
			return err
		}
		return p.Set(ref, "flows", old.flows)
	})
	if undo != nil {
		return outline.JoinErrors(err, outline.Errorf("restore %s: %w", configSteering, undo))
	}
	return err
}

// NetworkSeenFile is where /etc/init.d/packet-steering notes, below the
// root, the settings on LuCI's network page (network.@globals[0].
// packet_steering and steering_flows, as "VALUE/FLOWS") as it last saw them
// (files/usr/share/packet-steering/stock.sh, ps_remember_network): a reload
// for a network change carries them into packet_steering.globals only when
// they differ from the note. SetMode writes both files, so it writes the
// note too; otherwise its own write of the network file looks like a change
// on the page at the next reload_config, which then undoes a
// packet_steering option set since (found by make test-openwrt's reboot
// pair: set_mode all, then `uci set packet_steering.globals.flows=256` and
// reload_config put flows back to 0, the steering_flows set_mode wrote).
const NetworkSeenFile = "var/run/packet-steering/network-globals"

// noteNetworkWritten records in root's NetworkSeenFile the network-page
// values persistSettings wrote for m and flows (write and rename). The note
// is advisory: when it cannot be written it is removed, and with no note
// the next network reload takes the page's values, which are these.
func noteNetworkWritten(root string, m plan.Mode, flows int) {
	path := outline.JoinPath(root, NetworkSeenFile)
	b := []byte(networkSteeringValue(m) + "/" + outline.Itoa(flows) + "\n")
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		tmp := path + ".new"
		if err = os.WriteFile(tmp, b, 0o644); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		os.Remove(path)
	}
}

// DeviceRPS is one device's RPS mask (kernel hex format) for every rx queue,
// as a `config device` section of packet_steering holds it in rps_cpus.
type DeviceRPS struct {
	_      outline.NoCompare
	Device string
	Mask   string
}

// PersistDeviceRPS writes each device's mask to rps_cpus in its `config
// device` section of packet_steering (adding a section when the device has
// none) and drops that section's per-queue queue_rps list, which would
// otherwise override the mask on some queues. Other sections and options
// are left as they are. The masks take effect in mode custom. A device name
// or mask that does not parse is ErrInvalid, and nothing is written.
func PersistDeviceRPS(configDir string, rps []DeviceRPS) error {
	for _, r := range rps {
		if !plan.ValidDeviceName(r.Device) {
			return outline.Errorf("%w: device name %q", plan.ErrInvalid, r.Device)
		}
		if _, err := cpuset.ParseMask(r.Mask); err != nil {
			return outline.Errorf("%w: device %s: %v", plan.ErrInvalid, r.Device, err)
		}
	}
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return outline.Errorf("config dir: %w", err)
	}
	err := uci.Update(configDir, configSteering, func(p *uci.Package) error {
		for _, r := range rps {
			ref := ""
			for _, s := range p.SectionsOfType("device") {
				if n, _ := s.Get("name"); n == r.Device {
					ref = s.Name
					break
				}
			}
			if ref == "" {
				s, err := p.AddSection("device", "")
				if err != nil {
					return err
				}
				ref = s.Name
				if err := p.Set(ref, "name", r.Device); err != nil {
					return err
				}
			}
			if err := p.Set(ref, "rps_cpus", r.Mask); err != nil {
				return err
			}
			if err := p.DeleteOption(ref, "queue_rps"); err != nil && !errors.Is(err, uci.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return outline.Errorf("save %s/%s device sections: %w", configDir, configSteering, err)
	}
	return nil
}

// removeIfEmpty removes a config file that a failed uci.Update created empty
// (it creates the file to lock it), so that a failed save leaves no trace.
// A file someone filled meanwhile stays.
func removeIfEmpty(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		os.Remove(path)
	}
}
