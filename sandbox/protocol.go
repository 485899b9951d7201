package sandbox

import "errors"

// The parent (Run) and the sandbox init (InitIfChild, or InitMain in the
// separate init program) talk over pipes. The parent sends one initConfig as
// JSON and closes the pipe; the init answers with initEvent JSON lines. Both
// sides check the other's identity (initIdentity) before the program starts:
// the init refuses a config whose Identity is not its own, and the parent
// refuses a ready event that does not carry its own. When the init is ready
// to start the program it reports how many tasks (threads) it has; the parent, which has put the init
// in the run's cgroups, sets the process limit accordingly and writes one byte
// on the control pipe to let the program start. Once the program has started,
// the parent moves the init out of the run's cgroups and makes the limit
// exact. The parent closes the control pipe to let the init exit.

// InitProgram is the file name of the sandbox init program that Run starts
// when it lies beside the calling executable (cmd/feval-sandbox-init, built
// next to bin/feval by make build).
const InitProgram = "feval-sandbox-init"

// InitEnv names the environment variable that, when set, is the path of the
// sandbox init program Run must start, instead of the one beside the calling
// executable.
const InitEnv = "FEVAL_SANDBOX_INIT"

// ErrStaleInit is wrapped by the error of a run whose init program was built
// from other source than the caller: the run did not start the program.
var ErrStaleInit = errors.New("the sandbox init was built from other source than this program")

// initEnv is the environment variable that marks a process as a sandbox init.
// Its value is the mode: "run" or "probe".
const initEnv = "_FEVAL_SANDBOX_INIT"

// Descriptor numbers in the init process.
const (
	fdConfig       = 3 // read: initConfig JSON
	fdStatus       = 4 // write: initEvent lines
	fdControl      = 5 // read: go byte, then EOF
	fdTargetStderr = 6 // the program's stderr; fd 1 is the program's stdout
	fdListen       = 7 // the listening socket of Spec.Listen, if any
)

// initTaskAllowance is added to the process limit while the init starts up
// in the run's cgroups, before the program exists.
const initTaskAllowance = 64

// initTaskSlack is added to the process limit, besides the init's tasks
// counted just before the program starts, for the threads the init's runtime
// may add until the parent moves the init out of the run's cgroups.
const initTaskSlack = 4

type initMount struct {
	Source string `json:"source"`
	Target string `json:"target"`
	Dir    bool   `json:"dir"`
}

type initConfig struct {
	// Identity is the parent's initIdentity.
	Identity string `json:"identity"`
	// Filter is the program's seccomp filter, as raw struct sock_filter
	// instructions in the host's byte order, assembled once by the parent.
	Filter []byte `json:"filter"`
	// RefuseInotify says the filter refuses inotify; the init checks that
	// the kernel then cannot bound inotify per user namespace.
	RefuseInotify bool        `json:"refuse_inotify"`
	RootDir       string      `json:"root_dir"`
	Args          []string    `json:"args"`
	Env           []string    `json:"env"`
	Dir           string      `json:"dir"`
	Inputs        []initMount `json:"inputs"`
	Socket        string      `json:"socket"`
	// Listen passes fdListen to the program as ListenFD.
	Listen      bool  `json:"listen"`
	TmpBytes    int64 `json:"tmp_bytes"`
	OutputBytes int64 `json:"output_bytes"`
	OutputFiles int64 `json:"output_files"`
	OpenFiles   int64 `json:"open_files"`
	// CPUMillis sets the program's RLIMIT_CPU backstop, unless NoLimit.
	CPUMillis int64 `json:"cpu_millis"`
	// SetUID makes the init switch the program to UID and GID; otherwise the
	// init already runs as UID inside (single-uid mapping).
	SetUID bool `json:"set_uid"`
	// Landlock applies a Landlock ruleset when the kernel has one.
	Landlock bool `json:"landlock"`
	// Notify makes denied system calls reach the init (seccomp user
	// notification) so it can name them; otherwise they kill the caller.
	Notify bool `json:"notify"`
}

const (
	evReady   = "ready"
	evStarted = "started"
	evExited  = "exited"
	evError   = "error"
)

type initEvent struct {
	Event string `json:"e"`
	// ready
	Tasks    int64  `json:"tasks,omitempty"`
	Identity string `json:"identity,omitempty"`
	// started
	Landlock int `json:"landlock,omitempty"`
	// exited
	ExitCode int `json:"exit_code,omitempty"`
	Signal   int `json:"signal,omitempty"`
	// Violation is the denied call that ended the run: "syscall N" with
	// its number (the parent names it), or unidentifiedViolation.
	Violation  string `json:"violation,omitempty"`
	Sigsys     bool   `json:"sigsys,omitempty"`
	UserMicros int64  `json:"user_micros,omitempty"`
	SysMicros  int64  `json:"sys_micros,omitempty"`
	MaxRSSKiB  int64  `json:"max_rss_kib,omitempty"`
	// error
	Stage   string `json:"stage,omitempty"`
	Message string `json:"message,omitempty"`
}
