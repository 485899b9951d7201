//go:build linux

package sandbox

import (
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
	return encodeFilter(prog), nil
}

// UseInit makes Run start the init at path ("/proc/self/exe" for the calling
// binary itself) instead of looking for one, until the returned function is
// called.
func UseInit(path string) (restore func()) {
	old := initOverride
	initOverride = &path
	return func() { initOverride = old }
}
