package evaluate

import (
	"context"
	"errors"
	"testing"

	"github.com/feval/feval/protocol"
)

func TestDriverDispatch(t *testing.T) {
	for _, p := range []string{"rollouts", "optimizer"} {
		if _, err := (Options{}).Driver(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := (Options{}).Driver("chess"); err == nil {
		t.Error("an unknown protocol has a driver")
	}
	// A rollouts audit without a beacon is refused as a missing option,
	// before any row is read.
	d, _ := Options{}.Driver("rollouts")
	if _, err := d.Decide(context.Background(), protocol.Case{}); !errors.Is(err, ErrOptions) {
		t.Fatalf("rollouts without a beacon: %v", err)
	}
}
