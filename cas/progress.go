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
