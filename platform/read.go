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

// read is one Read through r.
func (f *reader) read(ctx context.Context) (*Snapshot, error) {
	var g gaps
	s := &Snapshot{Root: f.root}
	s.CPUs = f.readCPUs(&g)
	s.Devices = f.readDevices(&g)
	if s.Devices == nil {
		s.Devices = []Device{}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("platform: read %s: %w", f.root, err)
	}
	s.NAPIThreads, s.Processes = f.readProcesses(ctx, &g)
	tieThreads(s.NAPIThreads, s.Devices)
	s.IRQs = f.readIRQs(&g)
	tieIRQs(s.IRQs, s.Devices)
	s.Softnet = f.readSoftnet(&g)
	s.RPSSockFlowEntries = f.readRPSSockFlowEntries(&g)
	s.Identity = f.readIdentity(&g)
	s.Config = f.readConfig(&g)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("platform: read %s: %w", f.root, err)
	}
	s.Gaps = g.list
	return s, nil
}
