package platform

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
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
//
//go:noinline
func (f FS) Read(ctx context.Context) (*Snapshot, error) {
	return f.readWith(ctx, nil, readAll, nil, nil, nil)
}

// readLevel is how much of the machine a Read reads.
type readLevel int

const (
	readAll      readLevel = iota // everything (Read)
	readInputs                    // the inputs of plans and views (ReadInputs)
	readDecision                  // what an apply decides with (ReadDecision)
)

// readWith is Read with a config memo (nil for none), of as much as level
// says (and scope, when not nil), counting its system calls in count (nil:
// not counted).
func (f FS) readWith(ctx context.Context, memo *configMemo, level readLevel, pool *sync.Pool, count *kfs.Counts, scope *DeviceScope) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, outline.Errorf("platform: read %s: %w", f.root, err)
	}
	r, err := f.newReader(count)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.memo = memo
	r.inputsOnly = level >= readInputs
	r.decisionOnly = level >= readDecision
	r.pool = pool
	r.scope = scope
	return r.read(ctx)
}

// DeviceScope narrows a decision read to what the decision for one netdev
// needs (Reader.ReadDevice).
type DeviceScope struct {
	// Device is the netdev the decision is for.
	Device string
	// Others reports, given the configuration and Device as read, whether
	// that decision depends on the other netdevs at all; nil: it does.
	Others func(cfg *Config, dev *Device) bool
}

// ReadDevice is ReadDecision for the decision of one netdev (a hotplug
// apply of it). Device, its NAPI threads and its IRQs are read in full;
// the rest of the machine only as far as a decision uses it:
//
//   - the other netdevs in shape only: their links, kind, phy, driver, DSA
//     tagging and queue names, not their knobs (RPSCPUs, RPSFlowCnt and
//     XPSCPUs stay zero); none at all when scope.Others says the decision
//     does not depend on them;
//   - the CPUs of the NAPI threads tied to Device only, the affinity of the
//     IRQs tied to Device only (the others' stay "");
//   - not the RFS sysctl, which no device's apply writes
//     (RPSSockFlowEntries -1).
//
// A Device that does not exist is no error: the snapshot has no such
// netdev (and reads the others as scope.Others says for a zero Device).
func (r *Reader) ReadDevice(ctx context.Context, root string, scope DeviceScope) (*Snapshot, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	return f.readWith(ctx, &r.memo, readDecision, &r.scratch, r.count, &scope)
}

// Reader reads machines like Read, and keeps what makes repeated reads
// cheaper without making them less true: the parse of each UCI config file,
// reused only while the file holds exactly the same bytes (every file is
// still read on every call). A daemon that answers status calls keeps one
// Reader. It is safe for concurrent use.
type Reader struct {
	memo    configMemo
	scratch sync.Pool   // *scratch: buffers of finished Reads
	count   *kfs.Counts // nil: calls not counted
}

// NewReader returns a Reader with nothing remembered yet.
func NewReader() *Reader { return &Reader{} }

// NewCountingReader is NewReader counting the file system calls of every
// Read in c, for tests and benchmarks that measure what a read costs.
func NewCountingReader(c *kfs.Counts) *Reader { return &Reader{count: c} }

// Read is the package-level Read, with r's memo.
func (r *Reader) Read(ctx context.Context, root string) (*Snapshot, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	return f.readWith(ctx, &r.memo, readAll, &r.scratch, r.count, nil)
}

// ReadInputs is Read without the fields that only describe the machine and
// are no input of a steering decision: Device.Ifindex, OperState, Master,
// BridgePorts, Threaded and TxQueue.XPSRxQs stay zero (and unread, so they
// are never gaps). Every other field, live values included, is read as by Read. A
// status call that only needs the plan and the live knobs reads a fifth
// fewer files.
func (r *Reader) ReadInputs(ctx context.Context, root string) (*Snapshot, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	return f.readWith(ctx, &r.memo, readInputs, &r.scratch, r.count, nil)
}

// ReadDecision is ReadInputs without what a plan never decides with and
// only status or the adaptive mode show: Softnet stays empty and
// Identity.Model "" (proc/net/softnet_stat and tmp/sysinfo/model are not
// read). An apply reads the machine this way.
func (r *Reader) ReadDecision(ctx context.Context, root string) (*Snapshot, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	return f.readWith(ctx, &r.memo, readDecision, &r.scratch, r.count, nil)
}

// read is one Read through r. A snapshot is hundreds of small files; so
// that a machine with more than one CPU reads them in parallel, the work is
// cut into tasks (each netdev is one) that this goroutine and a second one,
// with scratch buffers of its own, take in turn until none is left: however
// late the second one starts, neither waits for the other. Every task
// records its gaps apart, and they are joined in the order of a sequential
// read (CPUs, devices in name order, processes, IRQs, softnet, sysctl,
// identity, config).
//
// A decision read (an apply's) takes the tasks on this goroutine alone:
// an apply competes for CPU time with the router's packets, while nobody
// waits for it the way a status caller does. The second goroutine's
// wake-ups cost about a tenth more CPU time than the reads themselves
// save (BenchmarkApplyFloor, README "Performance").
func (f *reader) read(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{Root: f.root}
	second := f.sibling()
	var sc *scratch
	if f.pool != nil {
		sc, _ = f.pool.Get().(*scratch)
		if sc != nil {
			f.useBuffers(sc.bufs[0])
			second.useBuffers(sc.bufs[1])
		} else {
			sc = &scratch{}
		}
		// Back to the pool only once f and second read nothing more: the
		// tail below (readEffective, a scope's threads and IRQs) still
		// reads through f's buffers.
		defer func() {
			sc.bufs = [2]kfs.Reader{f.buffers(), second.buffers()}
			f.pool.Put(sc)
		}()
	}
	var cpuGaps, devGaps, procGaps, irqGaps, netGaps, idGaps, cfgGaps, nlGaps gaps
	work := f.listDevices(&devGaps)
	scope := f.scope
	var nl *netlinkData
	tasks := []func(r *reader){
		func(r *reader) { s.NAPIThreads, s.Processes = r.readProcesses(ctx, &procGaps) },
		func(r *reader) { s.CPUs = r.readCPUs(&cpuGaps) },
		func(r *reader) { s.IRQs = r.readIRQs(&irqGaps) },
		func(r *reader) {
			if r.decisionOnly {
				s.Softnet = []SoftnetStat{}
			} else {
				s.Softnet = r.readSoftnet(&netGaps)
			}
			if scope != nil {
				s.RPSSockFlowEntries = -1
			} else {
				s.RPSSockFlowEntries = r.readRPSSockFlowEntries(&netGaps)
			}
		},
		func(r *reader) { s.Identity = r.readIdentity(&idGaps) },
	}
	if f.netlink != nil {
		tasks = append(tasks, func(r *reader) { nl = f.netlink(ctx, !f.decisionOnly) })
	}
	if scope == nil {
		tasks = append(tasks, func(r *reader) { s.Config = r.readConfig(&cfgGaps) })
	} else {
		// Whether the other netdevs are read depends on the config and
		// the device: both first.
		s.Config = f.readConfig(&cfgGaps)
		work = f.scopeDevices(work, scope, &s.Config)
	}
	if work != nil {
		for i := range work.names {
			shape := scope != nil
			if shape && work.names[i] == scope.Device {
				continue // read by scopeDevices
			}
			tasks = append(tasks, func(r *reader) {
				work.devs[i], work.hasBus[i] = r.readDevice(work.names[i], &work.gaps[i], shape)
			})
		}
	}
	var next atomic.Int64
	run := func(r *reader) {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(tasks) {
				return
			}
			tasks[i](r)
		}
	}
	if f.decisionOnly {
		run(f)
	} else {
		done := make(chan struct{})
		go func() {
			defer close(done)
			run(second)
		}()
		run(f)
		<-done
	}
	var writerGaps gaps
	s.Writers = f.readWriters(&writerGaps, s.Processes)
	s.Devices = []Device{}
	if work != nil {
		s.Devices = work.finish(&devGaps)
	}
	s.NAPIThreads, s.Workers = splitWorkers(s.NAPIThreads)
	tieThreads(s.NAPIThreads, s.Devices)
	tieIRQs(s.IRQs, s.Devices)
	tieDashQueues(s.IRQs, s.Devices)
	tieCarriers(s.Devices, s.Config.PPPoE)
	f.readEffective(s, &irqGaps) // boards.go
	if scope != nil {
		// What readProcesses and readIRQs left out: the device's own.
		threads := s.NAPIThreads[:0]
		for _, t := range s.NAPIThreads {
			if t.Device == scope.Device {
				var ok bool
				if t.CPUs, ok = f.threadCPUs(itoa(t.PID), &procGaps); !ok {
					continue // exited meanwhile, dropped as readProcesses drops it
				}
			}
			threads = append(threads, t)
		}
		s.NAPIThreads = threads
		for i := range s.IRQs {
			if s.IRQs[i].Device == scope.Device {
				f.readIRQAffinity(&s.IRQs[i], &irqGaps)
			}
		}
	}
	classifyThreads(s.NAPIThreads, s.Devices, s.IRQs)
	applyNetlink(s, nl, &nlGaps)
	if err := ctx.Err(); err != nil {
		return nil, outline.Errorf("platform: read %s: %w", f.root, err)
	}
	var all []Gap
	for _, g := range []*gaps{&cpuGaps, &devGaps, &procGaps, &irqGaps, &netGaps, &idGaps, &cfgGaps, &writerGaps, &nlGaps} {
		all = append(all, g.list...)
	}
	s.Gaps = all
	return s, nil
}
