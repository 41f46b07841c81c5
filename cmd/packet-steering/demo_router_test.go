//go:build router

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDemoNotInRouterBuild(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, []string{"demo"})
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), "demo is not in this build; build without -tags router") {
		t.Errorf("stderr %q does not say the demo is left out", errb.String())
	}
}
