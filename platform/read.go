package platform

import (
	"context"
	"fmt"
)

// Read reads the machine below root ("/" on a router, or a fixture root)
// into a Snapshot. Only a root that is not an existing directory, or a
// cancelled ctx, is an error: every file that is missing or unreadable is
// recorded in Snapshot.Gaps (paths relative to root) and the snapshot holds
// whatever else could be read. Config files that do not parse are listed in
// Snapshot.Config.Errors.
//
// Read never writes anything and never follows a name from file contents
// into a path: device, queue and process names come from directory listings.
func Read(ctx context.Context, root string) (*Snapshot, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	return f.Read(ctx)
}

// Read reads the machine below f's root; see the package-level Read.
func (f FS) Read(ctx context.Context) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("platform: read %s: %w", f.root, err)
	}
	r, err := f.newReader()
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.read(ctx)
}

// read is one Read through r. The netdevs are read on a second goroutine,
// with scratch buffers of its own, while this one reads everything else:
// a snapshot is hundreds of small files, and on a machine with more than
// one CPU the two halves overlap. Gaps keep the order of a sequential read
// (CPUs, devices, then the rest).
func (f *reader) read(ctx context.Context) (*Snapshot, error) {
	var cpuGaps, devGaps, g gaps
	s := &Snapshot{Root: f.root}
	devReader := f.sibling()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Devices = devReader.readDevices(&devGaps)
	}()
	s.CPUs = f.readCPUs(&cpuGaps)
	s.NAPIThreads, s.Processes = f.readProcesses(ctx, &g)
	s.IRQs = f.readIRQs(&g)
	s.Softnet = f.readSoftnet(&g)
	s.RPSSockFlowEntries = f.readRPSSockFlowEntries(&g)
	s.Identity = f.readIdentity(&g)
	s.Config = f.readConfig(&g)
	<-done
	if s.Devices == nil {
		s.Devices = []Device{}
	}
	tieThreads(s.NAPIThreads, s.Devices)
	tieIRQs(s.IRQs, s.Devices)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("platform: read %s: %w", f.root, err)
	}
	all := make([]Gap, 0, len(cpuGaps.list)+len(devGaps.list)+len(g.list))
	all = append(append(append(all, cpuGaps.list...), devGaps.list...), g.list...)
	if len(all) == 0 {
		all = nil
	}
	s.Gaps = all
	return s, nil
}
