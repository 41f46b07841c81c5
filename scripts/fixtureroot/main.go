// Command fixtureroot writes a fixture root of a preset router
// (platform/fixture) into an empty or new directory, for measuring the
// program on a fixed machine shape (scripts/syscount.sh).
//
//	go run ./scripts/fixtureroot PRESET DIR
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/packet-steering/packet-steering/platform/fixture"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: fixtureroot PRESET DIR (presets: %s)\n", strings.Join(fixture.PresetNames(), ", "))
		os.Exit(2)
	}
	spec, ok := fixture.Preset(os.Args[1])
	if !ok {
		fmt.Fprintf(os.Stderr, "fixtureroot: no preset %q (presets: %s)\n", os.Args[1], strings.Join(fixture.PresetNames(), ", "))
		os.Exit(2)
	}
	if err := fixture.Build(os.Args[2], spec); err != nil {
		fmt.Fprintf(os.Stderr, "fixtureroot: %v\n", err)
		os.Exit(1)
	}
}
