package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/packet-steering/packet-steering/internal/genetlink"
)

// SetNAPIKnobs writes the per-NAPI knobs of netlink napi-set (Linux 6.13+)
// to NAPI instance id, in the calling thread's network namespace, and
// returns the values it replaced, which written back the same way are the
// rollback. A kernel without napi-set gets an error wrapping
// ErrNAPIKnobsUnsupported and nothing is written; a NAPI id the kernel
// does not have, one wrapping fs.ErrNotExist.
//
// What they trade: defer-hard-irqs N keeps the device's IRQ masked for up
// to N empty polls and gro-flush-timeout T (ns) re-polls from a timer
// instead, so that a busy queue costs fewer interrupts at up to T of added
// latency (Documentation/networking/napi.rst).
func SetNAPIKnobs(ctx context.Context, id int, k NAPIKnobs) (NAPIKnobs, error) {
	if id <= 0 || id > 1<<31-1 {
		return NAPIKnobs{}, fmt.Errorf("platform: NAPI id %d out of range", id)
	}
	if k.DeferHardIRQs > 1<<31-1 {
		return NAPIKnobs{}, fmt.Errorf("platform: defer-hard-irqs %d is above the kernel's maximum %d", k.DeferHardIRQs, 1<<31-1)
	}
	ctx, cancel := context.WithTimeout(ctx, netlinkTimeout)
	defer cancel()
	c, err := genetlink.Dial()
	if err != nil {
		return NAPIKnobs{}, fmt.Errorf("platform: napi-set: %w", err)
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if errors.Is(err, fs.ErrNotExist) {
		return NAPIKnobs{}, fmt.Errorf("platform: napi-set: %w (no netdev netlink family)", ErrNAPIKnobsUnsupported)
	}
	if err != nil {
		return NAPIKnobs{}, fmt.Errorf("platform: napi-set: %w", err)
	}
	if !nd.Supports("napi-set") {
		return NAPIKnobs{}, fmt.Errorf("platform: napi-set: %w", ErrNAPIKnobsUnsupported)
	}
	cur, err := nd.NAPI(ctx, uint32(id))
	if err != nil {
		return NAPIKnobs{}, fmt.Errorf("platform: NAPI %d: %w", id, err)
	}
	if cur.Config.DeferHardIRQs == nil || cur.Config.GROFlushTimeout == nil {
		return NAPIKnobs{}, fmt.Errorf("platform: NAPI %d: the kernel reports no knobs: %w", id, ErrNAPIKnobsUnsupported)
	}
	old := NAPIKnobs{DeferHardIRQs: *cur.Config.DeferHardIRQs, GROFlushTimeoutNS: *cur.Config.GROFlushTimeout}
	d, g := k.DeferHardIRQs, k.GROFlushTimeoutNS
	if err := nd.SetNAPI(ctx, uint32(id), genetlink.NAPIConfig{DeferHardIRQs: &d, GROFlushTimeout: &g}); err != nil {
		return NAPIKnobs{}, fmt.Errorf("platform: NAPI %d: %w", id, err)
	}
	return old, nil
}

// The per-NAPI knobs by their netdev netlink attribute names, as
// ReadNAPIKnob and WriteNAPIKnob take them.
const (
	// NAPIKnobDeferHardIRQs is defer-hard-irqs (Linux 6.13+): how many
	// empty polls keep the device's IRQ masked.
	NAPIKnobDeferHardIRQs = "defer-hard-irqs"
	// NAPIKnobGROFlushTimeout is gro-flush-timeout in nanoseconds (6.13+).
	NAPIKnobGROFlushTimeout = "gro-flush-timeout"
	// NAPIKnobThreaded is the NAPI's own threaded mode, 0 or 1 (6.17+).
	NAPIKnobThreaded = "threaded"
)

// ErrNAPIThreadedUnsupported is wrapped when a kernel has napi-set but no
// per-NAPI threaded (before Linux 6.17: napi-get reports no threaded).
var ErrNAPIThreadedUnsupported = errors.New("per-NAPI threaded not supported by this kernel (needs Linux 6.17)")

// napiSetClient dials the netdev family and checks that the kernel has
// napi-set; the caller closes the connection.
func napiSetClient(ctx context.Context) (*genetlink.Conn, *genetlink.Netdev, error) {
	c, err := genetlink.Dial()
	if err != nil {
		return nil, nil, err
	}
	nd, err := genetlink.OpenNetdev(ctx, c)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("%w (no netdev netlink family)", ErrNAPIKnobsUnsupported)
	case err == nil && !nd.Supports("napi-set"):
		err = ErrNAPIKnobsUnsupported
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, nd, nil
}

// napiKnobValue is knob's value in cfg as decimal text, or an error
// wrapping ErrNAPIKnobsUnsupported (ErrNAPIThreadedUnsupported for
// threaded) when the kernel does not report it.
func napiKnobValue(cfg genetlink.NAPIConfig, knob string) (string, error) {
	switch knob {
	case NAPIKnobDeferHardIRQs:
		if cfg.DeferHardIRQs != nil {
			return strconv.FormatUint(uint64(*cfg.DeferHardIRQs), 10), nil
		}
	case NAPIKnobGROFlushTimeout:
		if cfg.GROFlushTimeout != nil {
			return strconv.FormatUint(*cfg.GROFlushTimeout, 10), nil
		}
	case NAPIKnobThreaded:
		if cfg.Threaded != nil {
			return strconv.FormatUint(uint64(*cfg.Threaded), 10), nil
		}
		return "", ErrNAPIThreadedUnsupported
	default:
		return "", fmt.Errorf("unknown per-NAPI knob %q", knob)
	}
	return "", fmt.Errorf("the kernel reports no %s: %w", knob, ErrNAPIKnobsUnsupported)
}

// ReadNAPIKnob returns one per-NAPI knob (NAPIKnob*) of NAPI instance id
// as decimal text, read with napi-get in the calling thread's network
// namespace. A kernel without napi-set or without the knob gives an error
// wrapping ErrNAPIKnobsUnsupported or ErrNAPIThreadedUnsupported; a NAPI id
// the kernel does not have, one wrapping fs.ErrNotExist.
func ReadNAPIKnob(ctx context.Context, id int, knob string) (string, error) {
	if id <= 0 || id > 1<<31-1 {
		return "", fmt.Errorf("platform: NAPI id %d out of range", id)
	}
	ctx, cancel := context.WithTimeout(ctx, netlinkTimeout)
	defer cancel()
	c, nd, err := napiSetClient(ctx)
	if err != nil {
		return "", fmt.Errorf("platform: NAPI %d %s: %w", id, knob, err)
	}
	defer c.Close()
	n, err := nd.NAPI(ctx, uint32(id))
	if err == nil {
		var v string
		if v, err = napiKnobValue(n.Config, knob); err == nil {
			return v, nil
		}
	}
	return "", fmt.Errorf("platform: NAPI %d %s: %w", id, knob, err)
}

// WriteNAPIKnob writes one per-NAPI knob (NAPIKnob*) of NAPI instance id
// with napi-set, in the calling thread's network namespace. The value is
// decimal: defer-hard-irqs 0..2^31-1, gro-flush-timeout in ns, threaded 0
// or 1. Nothing is written when the kernel lacks napi-set or does not
// report the knob on napi-get (errors as for ReadNAPIKnob), or when the
// value does not parse.
func WriteNAPIKnob(ctx context.Context, id int, knob, value string) error {
	if id <= 0 || id > 1<<31-1 {
		return fmt.Errorf("platform: NAPI id %d out of range", id)
	}
	var cfg genetlink.NAPIConfig
	v, err := strconv.ParseUint(value, 10, 64)
	switch knob {
	case NAPIKnobDeferHardIRQs:
		if err == nil && v > 1<<31-1 {
			err = fmt.Errorf("above the kernel's maximum %d", 1<<31-1)
		}
		d := uint32(v)
		cfg.DeferHardIRQs = &d
	case NAPIKnobGROFlushTimeout:
		cfg.GROFlushTimeout = &v
	case NAPIKnobThreaded:
		if err == nil && v > 1 {
			err = errors.New("want 0 or 1")
		}
		t := uint32(v)
		cfg.Threaded = &t
	default:
		err = errors.New("unknown per-NAPI knob")
	}
	if err != nil {
		return fmt.Errorf("platform: NAPI %d %s %q: %w", id, knob, value, err)
	}
	ctx, cancel := context.WithTimeout(ctx, netlinkTimeout)
	defer cancel()
	c, nd, err := napiSetClient(ctx)
	if err != nil {
		return fmt.Errorf("platform: NAPI %d %s: %w", id, knob, err)
	}
	defer c.Close()
	// napi-set refuses an attribute the kernel does not know only as a
	// whole request; napi-get says first whether it knows the knob.
	n, err := nd.NAPI(ctx, uint32(id))
	if err == nil {
		_, err = napiKnobValue(n.Config, knob)
	}
	if err == nil {
		err = nd.SetNAPI(ctx, uint32(id), cfg)
	}
	if err != nil {
		return fmt.Errorf("platform: NAPI %d %s: %w", id, knob, err)
	}
	return nil
}
