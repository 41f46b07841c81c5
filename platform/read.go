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
	return f.readWith(ctx, nil)
}

// readWith is Read with a config memo (nil for none).
func (f FS) readWith(ctx context.Context, memo *configMemo) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("platform: read %s: %w", f.root, err)
	}
	r, err := f.newReader()
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.memo = memo
	return r.read(ctx)
}

// Reader reads machines like Read, and keeps what makes repeated reads
// cheaper without making them less true: the parse of each UCI config file,
// reused only while the file holds exactly the same bytes (every file is
// still read on every call). A daemon that answers status calls keeps one
// Reader. It is safe for concurrent use.
type Reader struct {
	memo configMemo
}

// NewReader returns a Reader with nothing remembered yet.
func NewReader() *Reader { return &Reader{} }

// Read is the package-level Read, with r's memo.
func (r *Reader) Read(ctx context.Context, root string) (*Snapshot, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	return f.readWith(ctx, &r.memo)
}

// read is one Read through r. A snapshot is hundreds of small files, most
// of them the netdevs'; so that a machine with more than one CPU reads them
// in parallel, a second goroutine, with scratch buffers of its own, reads
// netdevs while this one reads everything else and then joins it on the
// netdevs left. Gaps keep the order of a sequential read (CPUs, devices in
// name order, then the rest).
func (f *reader) read(ctx context.Context) (*Snapshot, error) {
	var cpuGaps, devGaps, g gaps
	s := &Snapshot{Root: f.root}
	work := f.listDevices(&devGaps)
	var done chan struct{}
	if work != nil && len(work.names) > 1 {
		done = make(chan struct{})
		devReader := f.sibling()
		go func() {
			defer close(done)
			devReader.readSome(work)
		}()
	}
	s.CPUs = f.readCPUs(&cpuGaps)
	s.NAPIThreads, s.Processes = f.readProcesses(ctx, &g)
	s.IRQs = f.readIRQs(&g)
	s.Softnet = f.readSoftnet(&g)
	s.RPSSockFlowEntries = f.readRPSSockFlowEntries(&g)
	s.Identity = f.readIdentity(&g)
	s.Config = f.readConfig(&g)
	s.Devices = []Device{}
	if work != nil {
		f.readSome(work)
		if done != nil {
			<-done
		}
		s.Devices = work.finish(&devGaps)
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
