//go:build linux

package sandbox

import (
	"encoding/binary"

	seccomp "github.com/elastic/go-seccomp-bpf"
)

// CgroupHomes returns the directories under which Run creates its cgroups,
// for tests that check nothing is left behind.
func CgroupHomes() []string {
	var dirs []string
	for _, h := range discoverCgroups(false).homes {
		dirs = append(dirs, h.dir)
	}
	return sortedUnique(dirs)
}

// SeccompFilter returns the program's seccomp filter as raw struct
// sock_filter bytes (kill on violation), for peer tools in benchmarks.
func SeccompFilter() ([]byte, error) {
	prog, err := seccompProgram(seccomp.ActionKillProcess, false)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return out, nil
}
