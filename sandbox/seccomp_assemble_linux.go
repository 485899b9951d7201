//go:build !feval_sandbox_init

package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The caller's side of the filter: assembling it (once per process) and
// naming the denied calls the init reports. The init program is built
// with the tag feval_sandbox_init, which leaves this file, go-seccomp-bpf
// and its system call tables out of it (seccomp_init_linux.go).

// seccompPolicy builds the filter policy. violation is the action for
// violationSyscalls and namespace-creating clone calls; refuseInotify adds
// inotifySyscalls to the refused calls.
func seccompPolicy(violation seccomp.Action, refuseInotify bool) seccomp.Policy {
	denied := deniedSyscalls
	if refuseInotify {
		denied = append(append([]string(nil), deniedSyscalls...), inotifySyscalls...)
	}
	family := make(seccomp.ArgumentConditions, 0, len(allowedSocketFamilies))
	for _, f := range allowedSocketFamilies {
		family = append(family, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: f})
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{
				Names: violationSyscalls,
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "clone",
					Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: nsCloneFlags}},
				}},
				Action: violation,
			},
			{Names: denied, Action: seccomp.ActionErrno | seccomp.Action(unix.EPERM)},
			// clone3 passes its flags in memory, out of the filter's sight:
			// report it missing so that libc falls back to clone.
			{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
			{
				NamesWithCondtions: []seccomp.NameWithConditions{{Name: "socket", Conditions: family}, {Name: "socketpair", Conditions: family}},
				Action:             seccomp.ActionErrno | seccomp.Action(unix.EAFNOSUPPORT),
			},
		},
	}
}

// seccompProgram assembles the filter. It starts with a guard that kills any
// process calling through a foreign system call ABI (such as 32-bit calls on
// x86-64), which the policy's tables do not describe.
func seccompProgram(violation seccomp.Action, refuseInotify bool) ([]unix.SockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	p := seccompPolicy(violation, refuseInotify)
	insts, err := p.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling policy: %w", err)
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	raw, err := bpf.Assemble(append(guard, insts...))
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling BPF: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// filterCache holds the assembled filters, which depend only on the kernel.
var filterCache struct {
	sync.Mutex
	m map[filterKey][]byte
}

type filterKey struct {
	notify, refuseInotify bool
}

// programFilter returns the program's filter, encoded: violations go to the
// init's listener with notify, and kill the caller otherwise.
func programFilter(notify, refuseInotify bool) ([]byte, error) {
	k := filterKey{notify, refuseInotify}
	filterCache.Lock()
	defer filterCache.Unlock()
	if b, ok := filterCache.m[k]; ok {
		return b, nil
	}
	violation := seccomp.ActionKillProcess
	if notify {
		violation = seccomp.ActionUserNotify
	}
	prog, err := seccompProgram(violation, refuseInotify)
	if err != nil {
		return nil, err
	}
	if filterCache.m == nil {
		filterCache.m = map[filterKey][]byte{}
	}
	filterCache.m[k] = encodeFilter(prog)
	return filterCache.m[k], nil
}

// violationName turns the init's record of a denied call into the call's
// name where the host's system call table knows it.
func violationName(v string) string {
	n, ok := strings.CutPrefix(v, "syscall ")
	if !ok {
		return v
	}
	nr, err := strconv.Atoi(n)
	if err != nil {
		return v
	}
	if info, err := arch.GetInfo(""); err == nil {
		if s, ok := info.SyscallNumbers[nr]; ok {
			return s
		}
	}
	return v
}
