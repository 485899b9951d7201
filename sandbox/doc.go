// Package sandbox runs an untrusted program with no network, read-only
// inputs and bounded resources, and reports exactly what happened. It is the
// only way feval executes submission code.
//
// # Model
//
// Run starts the sandbox init, the small static program feval-sandbox-init
// beside the calling executable or, where there is none, the calling binary
// itself (/proc/self/exe), in fresh user, mount, pid, network, IPC, UTS and
// cgroup namespaces. The init is pid 1 of the new pid namespace. It builds a
// minimal root file system on a tmpfs (the host's /usr, /bin, /lib… and a few files of /etc bound
// read-only, a fresh /proc, a /dev with only null, zero, full, random and
// urandom (read-only binds), the Spec's inputs read-only under /in (as
// overlays, so that their host paths do not show in the mount table), a
// size-capped tmpfs at /tmp
// and at /out, and optionally one host Unix socket at /run/feval.sock),
// pivots into it, brings up loopback (the only interface), and then starts
// the program from a thread on which it has dropped every capability, set
// rlimits and no_new_privs, applied a Landlock ruleset where the kernel has
// Landlock, and installed a seccomp filter. In its user namespace it bounds
// the kernel objects the host counts per user (inotify, POSIX timers and
// queued signals, message queues; see MaxInotifyInstances). The program runs as UID 65534,
// which outside the sandbox is an unprivileged user (nobody when the caller
// is root, the caller itself otherwise). Its environment is exactly
// Spec.Env; its standard input is /dev/null; it inherits no other
// descriptor.
//
// When the program exits, the init kills everything left in the namespace and
// reaps it; unless a limit or a violation ended the run, Run measures /out as
// the host would hold it and, within the output limits, copies its regular
// files and directories to Spec.OutputDir (all or nothing) and lets the init
// exit. On a time limit, a process-limit hit
// or the end of the caller's context, Run kills the init, and the kernel kills
// every process of the namespace with it: nothing outlives a run.
//
// Memory, process and CPU limits use a cgroup per run (v2 where the
// controllers are delegated to the caller, v1 otherwise), which also reports
// out-of-memory kills, refused forks and peak memory, and caps the run's CPU
// bandwidth at every core but one so that Run's own timers are never starved. A limit whose mechanism
// is missing makes Run fail with an *UnavailableError and a ClassInfraError
// result: the sandbox never runs a program with weaker isolation than the
// Spec asks for. Spec.Unsandboxed is the one, explicit exception, for
// development: its Result is marked Unsandboxed and must never become a
// verdict.
//
// Denied system calls (ptrace, mount and the other mount-API calls, unshare,
// setns, namespace-creating clone, kexec, bpf, module loading, reboot, swap)
// end the run as ClassViolation naming the call: the seccomp filter hands
// them to the init through a user-notification descriptor, so a violation by
// any process of the tree is caught, also when its caller dies before the
// init has read it. Some other calls fail with EPERM without ending the run,
// clone3 fails with ENOSYS (so that libc falls back to clone, whose flags the
// filter can see), and socket families other than Unix fail with
// EAFNOSUPPORT. The program's processes may read each other's memory
// (/proc/PID/mem, process_vm_readv), not the init's.
//
// # Wiring
//
// Run looks for the init program at $FEVAL_SANDBOX_INIT (InitEnv), then
// beside os.Executable (InitProgram); its main is InitMain. The init and the
// caller exchange a checksum of this package's source and refuse to start a
// program when they differ (ErrStaleInit). Where no init program is found,
// the calling binary is its own init, so a binary that calls Run or Check
// must call InitIfChild as the first statement of main, and test binaries in
// TestMain:
//
//	func main() {
//		sandbox.InitIfChild()
//		…
//	}
//
// Check reports which mechanisms the host provides and, through
// Capabilities.Guarantees, which guarantees therefore hold. docs/SANDBOX.md
// states the threat model.
package sandbox
