package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

// namespaceKinds names each namespace flag, in a fixed order.
var namespaceKinds = []struct {
	flag uintptr
	name string
}{
	{syscall.CLONE_NEWNS, "mount"},
	{syscall.CLONE_NEWPID, "pid"},
	{syscall.CLONE_NEWNET, "network"},
	{syscall.CLONE_NEWIPC, "IPC"},
	{syscall.CLONE_NEWUTS, "UTS"},
	{syscall.CLONE_NEWCGROUP, "cgroup"},
}

// Check finds out which isolation mechanisms this host provides. It starts
// a few short-lived probe processes in fresh namespaces (the binary must call
// InitIfChild first in main) and creates and removes one probe cgroup per
// hierarchy. It never fails: what is missing is reported in Problems.
func Check() Capabilities {
	c := Capabilities{Root: os.Geteuid() == 0}
	var problems []string
	steps, err := probeNamespaces(namespaceFlags, "probe")
	if err == nil {
		c.UserNamespace, c.MountNamespace, c.PIDNamespace = true, true, true
		c.NetworkNamespace, c.IPCNamespace, c.UTSNamespace, c.CgroupNamespace = true, true, true, true
		c.ProcMount = steps["mount"] == "" && steps["tmpfs"] == "" && steps["proc"] == ""
		c.Loopback = steps["loopback"] == ""
		for _, k := range []string{"mount", "tmpfs", "proc", "loopback"} {
			if msg := steps[k]; msg != "" {
				problems = append(problems, fmt.Sprintf("probe step %s: %s", k, msg))
			}
		}
	} else {
		problems = append(problems, "all namespaces at once: "+err.Error())
		missing := missingNamespaces()
		has := func(name string) bool { return !contains(missing, name) }
		c.UserNamespace = has("user")
		c.MountNamespace, c.PIDNamespace, c.NetworkNamespace = has("mount"), has("pid"), has("network")
		c.IPCNamespace, c.UTSNamespace, c.CgroupNamespace = has("IPC"), has("UTS"), has("cgroup")
		for _, m := range missing {
			problems = append(problems, m+" namespace unavailable")
		}
	}

	c.Seccomp = seccompActionAvailable(unix.SECCOMP_RET_KILL_PROCESS)
	c.SeccompUserNotify = seccompActionAvailable(unix.SECCOMP_RET_USER_NOTIF)
	if !c.Seccomp {
		problems = append(problems, "seccomp filters with SECCOMP_RET_KILL_PROCESS unavailable")
	} else if !c.SeccompUserNotify {
		problems = append(problems, "seccomp user notification unavailable: violations kill the caller unnamed")
	}
	c.LandlockABI = landlockABI()
	c.Landlock = c.LandlockABI > 0
	if !c.Landlock {
		problems = append(problems, "landlock unavailable (defense in depth only; the mount namespace still confines the file system)")
	}

	layout := discoverCgroups(true)
	c.MemoryCgroup, c.PidsCgroup, c.CPUCgroup = layout.version(ctlMemory), layout.version(ctlPids), layout.version(ctlCPU)
	c.CPUQuotaCgroup = layout.version(ctlCPUQuota)
	for _, ctl := range controllers {
		if msg, ok := layout.problems[ctl]; ok {
			problems = append(problems, ctl+" cgroup: "+msg)
		}
	}
	sort.Strings(problems)
	c.Problems = append([]string{}, problems...)
	return c
}

// probeNamespaces starts the init in the given mode inside new namespaces
// and returns what it printed (a JSON object of step -> error in "probe"
// mode).
func probeNamespaces(flags uintptr, mode string) (map[string]string, error) {
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"feval-sandbox-probe"},
		Env:         []string{initEnv + "=" + mode},
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL},
	}
	setIDMappings(cmd.SysProcAttr)
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	steps := map[string]string{}
	if mode == "probe" {
		if err := json.Unmarshal(out, &steps); err != nil {
			return nil, fmt.Errorf("probe output %q: %w", out, err)
		}
	}
	return steps, nil
}

// missingNamespaces names the namespaces that cannot be created, each tried
// together with a user namespace.
func missingNamespaces() []string {
	if _, err := probeNamespaces(syscall.CLONE_NEWUSER, "exit"); err != nil {
		return []string{"user"}
	}
	var missing []string
	for _, k := range namespaceKinds {
		if _, err := probeNamespaces(syscall.CLONE_NEWUSER|k.flag, "exit"); err != nil {
			missing = append(missing, k.name)
		}
	}
	return missing
}

// namespaceGuarantee is the guarantee that a missing namespace breaks first.
func namespaceGuarantee(name string) string {
	switch name {
	case "network":
		return GuaranteeNoNetwork
	case "pid":
		return GuaranteeContainedTree
	case "user":
		return GuaranteeNoPrivilegeGain
	default:
		return GuaranteeReadOnlyHost
	}
}
