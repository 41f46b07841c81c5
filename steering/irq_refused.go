package steering

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// IRQs whose affinity the kernel refuses. Writing smp_affinity fails with
// EINVAL when the irq chip has no irq_set_affinity (the Raspberry Pi 5's
// RP1: raspberrypi/linux#6077, "write error: Invalid argument") and with
// EIO for managed or otherwise unmovable IRQs (irq_can_set_affinity_usr in
// kernel/irq/manage.c, write_irq_affinity in kernel/irq/proc.c). Such an
// IRQ is a fact of the board: the apply records it (below the root in
// platform.RefusedIRQsFile), does not fail or roll back the device for it,
// and the next plans leave it where the kernel keeps it (its
// effective_affinity) and place the rest around it (plan/rule_irqfixed.go).

// refusedIRQ reports an IRQ affinity write the kernel refused for good.
func refusedIRQ(a plan.Action, err error) bool {
	return a.Kind == plan.KindIRQAffinity && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIO))
}

// RecordRefusedIRQs adds the refused IRQ writes to the record below root
// (write and rename), keeping what it held; at most
// platform.MaxRefusedIRQs entries.
func RecordRefusedIRQs(root string, refused []Failure) error {
	path := outline.JoinPath(root, filepath.FromSlash(platform.RefusedIRQsFile))
	rec := map[int][2]string{}
	if b, err := os.ReadFile(path); err == nil && len(b) <= 64<<10 {
		rec = platform.ParseRefusedIRQs(b)
	}
	for _, f := range refused {
		if f.Action.Kind != plan.KindIRQAffinity || f.Action.IRQ < 0 {
			continue
		}
		if _, ok := rec[f.Action.IRQ]; !ok && len(rec) >= platform.MaxRefusedIRQs {
			continue
		}
		rec[f.Action.IRQ] = [2]string{f.Action.Name, f.Error}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return outline.Errorf("refused IRQs record: %w", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, platform.FormatRefusedIRQs(rec), 0o644); err != nil {
		return outline.Errorf("refused IRQs record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return outline.Errorf("refused IRQs record: %w", err)
	}
	return nil
}
