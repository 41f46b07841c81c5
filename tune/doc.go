// Package tune measures steering alternatives on the machine it runs on and
// recommends one: it applies each candidate configuration (a mode, or RPS
// masks per device), lets the system settle, drives load towards one
// user-named host several times, collects throughput, loss, retransmits and
// per-CPU softnet and softirq counter deltas, and summarises each metric as
// a median with its min-max spread.
//
// It is the engine of `packet-steering tune`. It never plans or writes a
// kernel knob itself: plans come from the steering package and writes go
// through its applier. It must never leave the machine in a candidate's
// state: the knobs every candidate touches are captured before the first
// apply and written back at the end, after success, after an error and after
// cancellation alike. It must never send load anywhere but the one target
// the user named.
package tune
