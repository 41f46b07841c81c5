//go:build router && !tune

package main

import (
	"io"

	"github.com/packet-steering/packet-steering/steering"
)

// printAdaptive prints nothing: the plain router build has no adaptive
// mode (see steering/adaptive_stub.go), so a status never carries it.
func printAdaptive(io.Writer, *steering.AdaptiveStatus) {}
