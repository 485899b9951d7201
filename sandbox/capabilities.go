package sandbox

import "sort"

// Guarantee names, as used in GuaranteeStatus and UnavailableError.
const (
	// GuaranteeNoNetwork: the program has a network namespace with only
	// loopback; it cannot reach the host's or any other network, nor resolve
	// names. Socket families outside the namespace's reach (vsock and others)
	// are refused.
	GuaranteeNoNetwork = "no-network"
	// GuaranteeReadOnlyHost: the program sees a minimal root (system
	// directories, its inputs) read-only; the feval store, keys and home
	// directories are not visible; it can write only to /out and /tmp.
	GuaranteeReadOnlyHost = "read-only-host"
	// GuaranteeContainedTree: every process the program starts lives in the
	// sandbox's pid namespace and is killed when the program exits, times out,
	// or the caller's context ends.
	GuaranteeContainedTree = "contained-process-tree"
	// GuaranteeNoPrivilegeGain: the program runs as an unprivileged user with
	// no capabilities and no_new_privs; setuid binaries are powerless.
	GuaranteeNoPrivilegeGain = "no-privilege-gain"
	// GuaranteeSyscallFilter: ptrace, mount, kexec, bpf, module loading and
	// namespace changes are denied, and attempting them is a violation.
	GuaranteeSyscallFilter = "syscall-filter"
	// GuaranteeMemoryLimit: Limits.MemoryBytes is enforced and an
	// out-of-memory kill is reported as such.
	GuaranteeMemoryLimit = "memory-limit"
	// GuaranteeProcessLimit: Limits.Processes is enforced and hitting it is
	// reported as such.
	GuaranteeProcessLimit = "process-limit"
	// GuaranteeCPULimit: Limits.CPUMillis bounds the whole process tree, and
	// the run's CPU share is capped below the host's cores so that the
	// supervisor can always end it on time.
	GuaranteeCPULimit = "cpu-limit"
	// GuaranteeOutputLimit: /out and /tmp are bounded in bytes and files.
	GuaranteeOutputLimit = "output-limit"
)

// Capabilities says which isolation mechanisms this host provides to Run.
// It is plain data, stable for a given host and kernel configuration.
type Capabilities struct {
	// Root reports that the caller is root; otherwise only its own ids can be
	// mapped into the sandbox.
	Root bool `json:"as_root"`

	UserNamespace    bool `json:"user_namespace"`
	MountNamespace   bool `json:"mount_namespace"`
	PIDNamespace     bool `json:"pid_namespace"`
	NetworkNamespace bool `json:"network_namespace"`
	IPCNamespace     bool `json:"ipc_namespace"`
	UTSNamespace     bool `json:"uts_namespace"`
	CgroupNamespace  bool `json:"cgroup_namespace"`
	// ProcMount reports that a fresh /proc could be mounted in the new namespaces.
	ProcMount bool `json:"proc_mount"`
	// Loopback reports that the loopback interface could be brought up.
	Loopback bool `json:"loopback"`

	Seccomp bool `json:"seccomp"`
	// SeccompUserNotify lets the sandbox name the denied system call of a
	// violation committed by any process of the tree.
	SeccompUserNotify bool `json:"seccomp_user_notify"`

	Landlock    bool `json:"landlock"`
	LandlockABI int  `json:"landlock_abi"`

	// MemoryCgroup, PidsCgroup and CPUCgroup are "v1", "v2" or "" when the
	// controller cannot be used.
	MemoryCgroup string `json:"memory_cgroup"`
	PidsCgroup   string `json:"pids_cgroup"`
	CPUCgroup    string `json:"cpu_cgroup"`
	// CPUQuotaCgroup is "v1", "v2" or "" for CPU bandwidth control, which
	// keeps a run below the host's core count.
	CPUQuotaCgroup string `json:"cpu_quota_cgroup"`

	// Problems explains, sorted, every mechanism that is missing.
	Problems []string `json:"probe_problems"`
}

// GuaranteeStatus says whether one guarantee holds on this host.
type GuaranteeStatus struct {
	Name  string `json:"name"`
	Holds bool   `json:"holds"`
	// Mechanisms provide the guarantee here.
	Mechanisms []string `json:"mechanisms"`
	// Missing are the required mechanisms this host lacks.
	Missing []string `json:"missing,omitempty"`
}

// mechanism is one mechanism a guarantee requires, and whether it is present.
type mechanism struct {
	ok   bool
	name string
}

// Guarantees derives, in a fixed order, which guarantees hold given c.
// Landlock is defense in depth for read-only-host and no-network: listed
// when present, never required.
func (c Capabilities) Guarantees() []GuaranteeStatus {
	g := func(name string, required []mechanism, extra ...string) GuaranteeStatus {
		s := GuaranteeStatus{Name: name, Holds: true, Mechanisms: []string{}}
		for _, r := range required {
			if r.ok {
				s.Mechanisms = append(s.Mechanisms, r.name)
			} else {
				s.Holds = false
				s.Missing = append(s.Missing, r.name)
			}
		}
		s.Mechanisms = append(s.Mechanisms, extra...)
		sort.Strings(s.Mechanisms)
		return s
	}
	var landlock []string
	if c.Landlock {
		landlock = []string{"landlock"}
	}
	cgroup := func(version, controller string) mechanism {
		if version == "" {
			return mechanism{false, controller + " cgroup"}
		}
		return mechanism{true, controller + " cgroup " + version}
	}
	notify := "seccomp kill on violation"
	if c.SeccompUserNotify {
		notify = "seccomp user notification"
	}
	userns := mechanism{c.UserNamespace, "user namespace"}
	mountns := mechanism{c.MountNamespace, "mount namespace"}
	return []GuaranteeStatus{
		g(GuaranteeNoNetwork, []mechanism{userns, {c.NetworkNamespace, "network namespace"}, {c.Loopback, "loopback only"}, {c.Seccomp, "seccomp socket-family filter"}}, landlock...),
		g(GuaranteeReadOnlyHost, []mechanism{userns, mountns, {c.ProcMount, "private /proc"}, {c.IPCNamespace, "IPC namespace"}, {c.UTSNamespace, "UTS namespace"}}, landlock...),
		g(GuaranteeContainedTree, []mechanism{userns, {c.PIDNamespace, "pid namespace"}}),
		g(GuaranteeNoPrivilegeGain, []mechanism{userns, {true, "no_new_privs"}, {true, "capability bounding set dropped"}}),
		g(GuaranteeSyscallFilter, []mechanism{{c.Seccomp, "seccomp"}}, notify),
		g(GuaranteeMemoryLimit, []mechanism{cgroup(c.MemoryCgroup, "memory")}),
		g(GuaranteeProcessLimit, []mechanism{cgroup(c.PidsCgroup, "pids")}),
		g(GuaranteeCPULimit, []mechanism{cgroup(c.CPUCgroup, "cpu accounting"), cgroup(c.CPUQuotaCgroup, "cpu bandwidth")}),
		g(GuaranteeOutputLimit, []mechanism{userns, mountns, {c.MountNamespace, "size-capped tmpfs"}}),
	}
}
