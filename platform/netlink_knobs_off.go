//go:build nonetlink

package platform

import (
	"context"
	"fmt"
)

// SetNAPIKnobs: a build with -tags nonetlink has no napi-set.
func SetNAPIKnobs(context.Context, int, NAPIKnobs) (NAPIKnobs, error) {
	return NAPIKnobs{}, fmt.Errorf("platform: napi-set: %w (-tags nonetlink)", ErrNAPIKnobsUnsupported)
}
