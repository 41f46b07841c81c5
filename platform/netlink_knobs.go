package platform

import (
	"context"
	"errors"
	"io/fs"
	"strconv"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/internal/outline"
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
		return NAPIKnobs{}, outline.Errorf("platform: NAPI id %d out of range", id)
	}
	if k.DeferHardIRQs > 1<<31-1 {
		return NAPIKnobs{}, outline.Errorf("platform: defer-hard-irqs %d is above the kernel's maximum %d", k.DeferHardIRQs, 1<<31-1)
	}
	ctx, cancel := context.WithTimeout(ctx, netlinkTimeout)
	defer cancel()
	c, err := genetlink.Dial()
	if err != nil {
		return NAPIKnobs{}, outline.Errorf("platform: napi-set: %w", err)
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if errors.Is(err, fs.ErrNotExist) {
		return NAPIKnobs{}, outline.Errorf("platform: napi-set: %w (no netdev netlink family)", ErrNAPIKnobsUnsupported)
	}
	if err != nil {
		return NAPIKnobs{}, outline.Errorf("platform: napi-set: %w", err)
	}
	if !nd.Supports("napi-set") {
		return NAPIKnobs{}, outline.Errorf("platform: napi-set: %w", ErrNAPIKnobsUnsupported)
	}
	cur, err := nd.NAPI(ctx, uint32(id))
	if err != nil {
		return NAPIKnobs{}, outline.Errorf("platform: NAPI %d: %w", id, err)
	}
	if cur.Config.DeferHardIRQs == nil || cur.Config.GROFlushTimeout == nil {
		return NAPIKnobs{}, outline.Errorf("platform: NAPI %d: the kernel reports no knobs: %w", id, ErrNAPIKnobsUnsupported)
	}
	old := NAPIKnobs{DeferHardIRQs: *cur.Config.DeferHardIRQs, GROFlushTimeoutNS: *cur.Config.GROFlushTimeout}
	d, g := k.DeferHardIRQs, k.GROFlushTimeoutNS
	if err := nd.SetNAPI(ctx, uint32(id), genetlink.NAPIConfig{DeferHardIRQs: &d, GROFlushTimeout: &g}); err != nil {
		return NAPIKnobs{}, outline.Errorf("platform: NAPI %d: %w", id, err)
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

// NAPIKnob reads one per-NAPI knob (NAPIKnob*) of NAPI instance id as
// decimal text with napi-get, or, with write, writes value (decimal:
// defer-hard-irqs 0..2^31-1, gro-flush-timeout in ns, threaded 0 or 1)
// with napi-set and returns it, in the calling thread's network
// namespace. A kernel without napi-set gives an error wrapping
// ErrNAPIKnobsUnsupported and nothing is written; a read of a knob the
// kernel does not report (threaded before 6.17) one wrapping it or
// ErrNAPIThreadedUnsupported; a NAPI id the kernel does not have, one
// wrapping fs.ErrNotExist. Which knobs a kernel has is the plan's to
// check (napi-get's config); napi-set refuses an attribute it does not
// know as a whole request.
func NAPIKnob(ctx context.Context, id int, knob, value string, write bool) (string, error) {
	var cfg genetlink.NAPIConfig
	v, err := strconv.ParseUint(value, 10, 64)
	u := uint32(v)
	switch {
	case id <= 0 || id > 1<<31-1:
		err = errors.New("NAPI id out of range")
	case !write:
		err = nil
	case knob == NAPIKnobDeferHardIRQs && v <= 1<<31-1:
		cfg.DeferHardIRQs = &u
	case knob == NAPIKnobGROFlushTimeout:
		cfg.GROFlushTimeout = &v
	case knob == NAPIKnobThreaded && v <= 1:
		cfg.Threaded = &u
	case err == nil:
		err = errors.New("unknown knob or value out of range")
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, netlinkTimeout)
		defer cancel()
		value, err = napiKnob(ctx, uint32(id), knob, cfg, write)
	}
	if err != nil {
		return "", outline.Errorf("platform: NAPI %d %s: %w", id, knob, err)
	}
	return value, nil
}

func napiKnob(ctx context.Context, id uint32, knob string, cfg genetlink.NAPIConfig, write bool) (string, error) {
	c, err := genetlink.Dial()
	if err != nil {
		return "", err
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", outline.Errorf("%w (no netdev netlink family)", ErrNAPIKnobsUnsupported)
	case err != nil:
		return "", err
	case !nd.Supports("napi-set"):
		return "", ErrNAPIKnobsUnsupported
	case write:
		return "", nd.SetNAPI(ctx, id, cfg)
	}
	n, err := nd.NAPI(ctx, id)
	if err != nil {
		return "", err
	}
	var p *uint32
	switch knob {
	case NAPIKnobDeferHardIRQs:
		p = n.Config.DeferHardIRQs
	case NAPIKnobGROFlushTimeout:
		if g := n.Config.GROFlushTimeout; g != nil {
			return outline.FormatUint(*g, 10), nil
		}
	case NAPIKnobThreaded:
		if p = n.Config.Threaded; p == nil {
			return "", ErrNAPIThreadedUnsupported
		}
	}
	if p == nil {
		return "", ErrNAPIKnobsUnsupported
	}
	return outline.FormatUint(uint64(*p), 10), nil
}
