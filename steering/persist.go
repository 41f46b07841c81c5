package steering

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/packet-steering/packet-steering/internal/uci"
)

// Config names and the network option values the stock init script reads
// (network.globals.packet_steering: 0 off, 1 on, 2 all CPUs).
const (
	configSteering = "packet_steering"
	configNetwork  = "network"
)

// networkSteeringValue is the network.globals.packet_steering value that
// tells LuCI and the stock scripts the same thing as mode.
func networkSteeringValue(m Mode) string {
	switch m {
	case ModeOff:
		return "0"
	case ModeAll:
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
// torn; when the second write fails the first is put back as it was.
func persistSettings(configDir string, m Mode, flows int) error {
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return fmt.Errorf("config dir: %w", err)
	}
	var old struct{ mode, flows string }
	steeringPath := filepath.Join(configDir, configSteering)
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
		return p.Set(ref, "flows", strconv.Itoa(flows))
	})
	if err != nil {
		if !existed {
			removeIfEmpty(steeringPath)
		}
		return fmt.Errorf("save %s/%s: %w", configDir, configSteering, err)
	}
	networkPath := filepath.Join(configDir, configNetwork)
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
		return p.Set(ref, "steering_flows", strconv.Itoa(flows))
	})
	if err == nil {
		return nil
	}
	if !networkExisted {
		removeIfEmpty(networkPath)
	}
	err = fmt.Errorf("save %s/%s: %w", configDir, configNetwork, err)
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
		return errors.Join(err, fmt.Errorf("restore %s: %w", configSteering, undo))
	}
	return err
}

// removeIfEmpty removes a config file that a failed uci.Update created empty
// (it creates the file to lock it), so that a failed save leaves no trace.
// A file someone filled meanwhile stays.
func removeIfEmpty(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		os.Remove(path)
	}
}
