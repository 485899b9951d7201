package cas

import "context"

type progressKey struct{}

// WithProgress returns a context that carries p to the long operations run
// under it (Copy, and in package bundle packing and reading payloads) whose own
// options name no Progress. A command sets it once; the library functions in
// between need not know about progress at all.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the Progress ctx carries, or NoProgress.
func ProgressFrom(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
		return p
	}
	return NoProgress
}

// progressOr returns p, or the context's Progress when p is nil.
func progressOr(ctx context.Context, p Progress) Progress {
	if p != nil {
		return p
	}
	return ProgressFrom(ctx)
}

// Steps counts the items of long work (the reveals of a batch, the scenarios
// of a pack, the training runs of an optimizer), for a display of counts,
// rate and time left. Implementations are safe for concurrent use.
type Steps interface {
	// Begin announces total items of one kind ("reveal", "scenario",
	// "run"); beginning a kind again starts its count over.
	Begin(kind string, total int)
	// Step reports one more item of the kind done.
	Step(kind string)
}

type noSteps struct{}

func (noSteps) Begin(string, int) {}
func (noSteps) Step(string)       {}

// NoSteps counts nothing.
var NoSteps Steps = noSteps{}

type stepsKey struct{}

// WithSteps returns ctx carrying s, which long work under it reports to.
func WithSteps(ctx context.Context, s Steps) context.Context {
	return context.WithValue(ctx, stepsKey{}, s)
}

// StepsFrom returns the Steps ctx carries, or NoSteps.
func StepsFrom(ctx context.Context) Steps {
	if s, ok := ctx.Value(stepsKey{}).(Steps); ok && s != nil {
		return s
	}
	return NoSteps
}
