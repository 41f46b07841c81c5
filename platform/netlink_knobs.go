package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

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
