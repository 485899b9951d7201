package evaluate

import (
	"context"
	"errors"
	"testing"

	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
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
	// A rollouts audit without a beacon is refused while preparing, before
	// anything is written; a rejected reveal needs none.
	d, _ := Options{}.Driver("rollouts")
	seen := protocol.Seen{Time: "2026-12-01T06:00:00Z"}
	c := protocol.Case{Entry: protocol.Entry{Status: protocol.StatusAccepted, RevealSeen: &seen}}
	if _, err := d.Prepare(context.Background(), c, protocol.Round{Protocol: "rollouts"}); !errors.Is(err, rollouts.ErrBeacon) {
		t.Fatalf("rollouts without a beacon: %v", err)
	}
	c.Entry.Status = protocol.StatusRejected
	if _, err := d.Prepare(context.Background(), c, protocol.Round{Protocol: "rollouts"}); err != nil {
		t.Fatalf("a rejected reveal: %v", err)
	}
}
