package sandbox

// Bounds on kernel objects that the host counts per user. The program's
// processes share one user, and what they hold is charged to that user on the
// host as well (the host user that UID maps to), so the sandbox sets these
// bounds inside its own user namespace and through rlimits: a run can never
// take more than this of a host user's allowance.
const (
	// MaxInotifyInstances bounds the inotify instances of one run.
	MaxInotifyInstances = 8
	// MaxInotifyWatches bounds the inotify watches of one run.
	MaxInotifyWatches = 4096
	// MaxPendingSignals bounds queued signals and POSIX timers of one run
	// (RLIMIT_SIGPENDING).
	MaxPendingSignals = 1024
)
