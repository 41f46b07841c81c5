package steering

import (
	"strings"
)

// The engine's half of the adaptive mode: it keeps the deviations from the
// auto plan, lays them over every plan made in adaptive mode (so that a
// hotplug apply or a reload keeps them), applies moves with the usual
// locking and rollback, reads the load samples, and reports all of it in
// Status and Queues.

// AdaptReason is the apply reason of a set of moves, as logged and sent
// with packet_steering.applied.
func AdaptReason(moves []Move) string {
	parts := make([]string, len(moves))
	for i, m := range moves {
		parts[i] = m.String()
	}
	return "adaptive: " + strings.Join(parts, "; ")
}
