//go:build race

package main

// raceEnabled: this test binary runs under the race detector, which makes
// every call several times slower; load tests scale their work down.
const raceEnabled = true
