//go:build router && !tune

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The small router build says where tune is instead of failing obscurely.
func TestTuneNotInRouterBuild(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, []string{"tune", "--target", "198.18.0.2"})
	if code != 2 || !strings.Contains(errb.String(), "packet-steering-tune") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
