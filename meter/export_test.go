package meter

// Budget exposes the ledger to the property tests.
type Budget struct{ b budget }

func (b *Budget) Init(cap int64)                 { b.b.cap = cap }
func (b *Budget) Reserve(n int64) error          { return b.b.reserve(n) }
func (b *Budget) Settle(r, cost int64) int64     { return b.b.settle(r, cost) }
func (b *Budget) State() (spent, reserved int64) { return b.b.state() }
